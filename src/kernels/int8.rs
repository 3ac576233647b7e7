//! The integer product of the q8 and q4 host twins: A's rows quantized on the fly in the blocks
//! of 32 the weights use (`activation_codes`: codes −127..=127, one f32 scale a block), multiplied by
//! W's codes (q8's −127..=127; q4's nibbles less 8, −8..=7, unpacked to bytes in registers)
//! with int32 sums per block, each sum scaled once by the two blocks' scales:
//!
//! C[m, n] = Σ_b sa[m, b] · sw[n, b] · Σ_{j < 32} qa[m, 32b + j] · qw[n, 32b + j]
//!
//! W is read as the bytes it is stored in and never written out as f32, so that a decoded
//! token (M = 1) reads each weight once. The block sums are exact on every path: 32 products
//! of codes within ±127 fit an i16 pair sum (the sign trick below) and an i32. The kernels
//! differ only in the order in which they add the scaled block sums in f32.
//!
//! Each path computes one row of A against a group of eight rows of W (`dot_1x8`): AVX2
//! natively (`vpmaddubsw` on |a| and w·sign(a), `vpmaddwd` to i32), wasm SIMD's
//! `i32x4.dot_i16x8_s` on codes widened to i16 in the browser builds, and plain loops
//! elsewhere (the reference the others match). Relaxed SIMD's
//! `i32x4.relaxed_dot_i8x16_i7x16_add_s` is left to the tiles of many rows
//! (`integer_gemm::relaxed`, which probe what the engine computes): Node.js 20's V8, behind its
//! flag, computes another sum.

use super::activation_codes::QuantizedRows;
use super::{each_chunk, scratch, Threads};
use crate::error::Result;
use crate::quantize::BLOCK;

impl QuantizedRows<i8> {
    fn row(&self, r: usize) -> Row<'_> {
        Row { codes: &self.codes[r * self.blocks * BLOCK..][..self.blocks * BLOCK], scales: &self.scales[r * self.blocks..][..self.blocks] }
    }
}

/// One row of A's codes in blocks of 32, with a scale a block.
#[derive(Clone, Copy)]
pub(super) struct Row<'a> {
    pub codes: &'a [i8],
    pub scales: &'a [f32],
}

/// W's rows as q8 or q4 stores them: `codes` [N, blocks · bytes a block] (q8: a byte a code;
/// q4: two codes a byte, the lower nibble first, each less 8), `scales` [N, blocks].
#[derive(Clone, Copy)]
pub(super) struct CodeRows<'a> {
    pub codes: &'a [u8],
    pub scales: &'a [f32],
    pub rows: usize,
    pub blocks: usize,
    pub nibbles: bool,
}

/// Rows of W a kernel call multiplies at once (one AVX2 vector of results).
const GROUP: usize = 8;

/// Eight rows of W from a multiple of 8 (past N, the last row again: computed and dropped):
/// their codes, and their scales where the format keeps them — row j's scale of block b is
/// `scales[first_scales[j] + b]`, which the AVX2 kernel gathers eight at a time.
pub(super) struct Group<'a> {
    rows: [&'a [u8]; GROUP],
    scales: &'a [f32],
    first_scales: [usize; GROUP],
}

impl<'a> CodeRows<'a> {
    fn row_bytes(&self) -> usize {
        self.blocks * block_bytes(self.nibbles)
    }

    pub fn codes_of(&self, n: usize) -> &'a [u8] {
        let n = n.min(self.rows - 1);
        &self.codes[n * self.row_bytes()..][..self.row_bytes()]
    }

    fn group(&self, g: usize) -> Group<'a> {
        let first = g * GROUP;
        let last = (first + GROUP).min(self.rows) - 1;
        Group {
            rows: std::array::from_fn(|j| self.codes_of(first + j)),
            scales: &self.scales[first * self.blocks..][..(last + 1 - first) * self.blocks],
            first_scales: std::array::from_fn(|j| ((first + j).min(last) - first) * self.blocks),
        }
    }
}

/// Bytes of a block of 32 codes: 32 for q8, 16 for q4's nibbles.
const fn block_bytes(nibbles: bool) -> usize {
    if nibbles {
        BLOCK / 2
    } else {
        BLOCK
    }
}

/// Block `b` of a row of W as 32 signed codes, in plain loops (the paths' reference).
pub(super) fn block_codes<const NIBBLES: bool>(row: &[u8], b: usize) -> [i8; BLOCK] {
    let bytes = &row[b * block_bytes(NIBBLES)..][..block_bytes(NIBBLES)];
    std::array::from_fn(|i| if NIBBLES { ((bytes[i / 2] >> (4 * (i % 2))) & 15) as i8 - 8 } else { bytes[i] as i8 })
}

/// Where C goes: rows of stride `c_rs`, columns 0..N, plus `bias`.
pub(super) struct Target<'c> {
    pub c: &'c mut [f32],
    pub c_rs: usize,
    pub bias: Option<&'c [f32]>,
}

/// Rows of W a task computes (W split over threads).
const TASK_ROWS: usize = 64;

/// The most rows of A this integer product takes (`kernels::quantized` sends longer products
/// to `integer_gemm`'s tiles natively with AVX-512 VNNI or AVX2 — with VNNI from 12 rows —,
/// elsewhere to the f32 product over decoded panels of W): up to here reading W is what the product costs, and the integer one reads a
/// quarter of f32's bytes; past it, multiply-adds are, and one row of A at a time reuses no
/// loaded block of W. Measured with MiniLM 32 × 128 (2026-11-30, 2 threads): this product
/// took 1.25× f32's time natively, 1.7× in Chromium.
pub(super) const MAX_ROWS: usize = 31;

/// C = A · Wᵀ (+ bias) with A's m rows quantized in `a` (m ≤ [`MAX_ROWS`]): W's rows split
/// over threads, each group of eight read once for every row of A.
pub(super) fn product(threads: Option<Threads<'_>>, a: &QuantizedRows<i8>, w: CodeRows<'_>, m: usize, target: Target<'_>) -> Result<()> {
    if w.nibbles {
        product_of::<true>(threads, a, w, m, target)
    } else {
        product_of::<false>(threads, a, w, m, target)
    }
}

/// `product` for W's codes in bytes or in nibbles.
fn product_of<const NIBBLES: bool>(threads: Option<Threads<'_>>, a: &QuantizedRows<i8>, w: CodeRows<'_>, m: usize, target: Target<'_>) -> Result<()> {
    let Target { c, c_rs, bias } = target;
    let n = w.rows;
    // Column-major results [N, M]: a task owns whole columns of C.
    let mut columns = scratch(n * m)?;
    each_chunk(threads, &mut columns, TASK_ROWS * m, |t, out| {
        for (g, columns) in out.chunks_mut(GROUP * m).enumerate() {
            let group = w.group(t * TASK_ROWS / GROUP + g);
            for i in 0..m {
                let values = dot_1x8::<NIBBLES>(a.row(i), &group);
                for (column, &value) in columns.chunks_exact_mut(m).zip(&values) {
                    column[i] = value;
                }
            }
        }
        Ok(())
    })?;
    for (j, column) in columns.chunks_exact(m).enumerate() {
        for (i, &value) in column.iter().enumerate() {
            c[i * c_rs + j] = value + bias.map_or(0.0, |bias| bias[j]);
        }
    }
    Ok(())
}

/// One row of A against a group of eight rows of W, on the fastest path this build and CPU
/// have.
#[inline]
fn dot_1x8<const NIBBLES: bool>(a: Row<'_>, w: &Group<'_>) -> [f32; GROUP] {
    let blocks = a.scales.len();
    let whole = |first: usize| first + blocks <= w.scales.len() && first <= i32::MAX as usize;
    if a.codes.len() != blocks * BLOCK || !w.first_scales.iter().all(|&first| whole(first)) || w.rows.iter().any(|r| r.len() != blocks * block_bytes(NIBBLES)) {
        // No construction here makes rows of unequal lengths, but the fast paths' loads rely
        // on it, so they are never handed any.
        return dot_1x8_portable::<NIBBLES>(a, w);
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU has AVX2 and FMA, checked just above, and the rows are whole.
        return unsafe { x86::dot_1x8::<NIBBLES>(a, w) };
    }
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    return wasm::dot_1x8::<NIBBLES>(a, w);
    #[allow(unreachable_code)]
    dot_1x8_portable::<NIBBLES>(a, w)
}

/// The plain-loop path: every block's exact sum, scaled and added in order.
fn dot_1x8_portable<const NIBBLES: bool>(a: Row<'_>, w: &Group<'_>) -> [f32; GROUP] {
    std::array::from_fn(|j| {
        let blocks = a.codes.chunks_exact(BLOCK).zip(a.scales).zip(&w.scales[w.first_scales[j]..]).enumerate();
        blocks.fold(0f32, |acc, (b, ((x, sa), sw))| {
            let sum: i32 = x.iter().zip(block_codes::<NIBBLES>(w.rows[j], b)).map(|(&x, y)| x as i32 * y as i32).sum();
            acc + sa * sw * sum as f32
        })
    })
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{block_bytes, Group, Row, BLOCK, GROUP};
    use std::arch::x86_64::*;

    /// The 32 codes of the block at `codes` as signed bytes: q8's as they are, q4's nibbles
    /// (16 bytes, the lower nibble first) spread to bytes in order, less 8.
    ///
    /// # Safety
    /// The CPU has AVX2; `codes` has a whole block.
    #[inline(always)]
    unsafe fn load_block<const NIBBLES: bool>(codes: *const u8) -> __m256i {
        // SAFETY: the caller's promise; loadu has no alignment requirement.
        unsafe {
            if !NIBBLES {
                return _mm256_loadu_si256(codes.cast());
            }
            let packed = _mm_loadu_si128(codes.cast());
            let low_bits = _mm_set1_epi8(0x0F);
            let (low, high) = (_mm_and_si128(packed, low_bits), _mm_and_si128(_mm_srli_epi16::<4>(packed), low_bits));
            let codes = _mm256_set_m128i(_mm_unpackhi_epi8(low, high), _mm_unpacklo_epi8(low, high));
            _mm256_sub_epi8(codes, _mm256_set1_epi8(8))
        }
    }

    /// `dot_1x8` with AVX2: per block and row of W, |a| (unsigned) times w·sign(a) (signed) in
    /// byte pairs (`vpmaddubsw`: at most 2 · 127 · 127, no saturation) and pairs of pairs to
    /// i32 (`vpmaddwd` by ones); the eight rows' vectors summed into one vector of eight
    /// block sums (`vphaddd`), converted, and added by the blocks' scales to eight results.
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA; A's row and W's have `a.scales.len()` blocks of 32 codes, and
    /// `w.scales` holds `a.scales.len()` scales from each of `w.first_scales` (each < 2^31).
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn dot_1x8<const NIBBLES: bool>(a: Row<'_>, w: &Group<'_>) -> [f32; GROUP] {
        let ones = _mm256_set1_epi16(1);
        let mut acc = _mm256_setzero_ps();
        let rows = w.rows.map(|r| r.as_ptr());
        let first_scales = w.first_scales.map(|first| first as i32);
        // SAFETY: eight i32s, loadu has no alignment requirement.
        let first_scales = unsafe { _mm256_loadu_si256(first_scales.as_ptr().cast()) };
        for (b, (x, &sa)) in a.codes.chunks_exact(BLOCK).zip(a.scales).enumerate() {
            // SAFETY: loadu has no alignment requirement; every row has block b (the caller's
            // promise) and its scale at first_scales[j] + b.
            unsafe {
                let x = _mm256_loadu_si256(x.as_ptr().cast());
                let ax = _mm256_sign_epi8(x, x);
                let sums = |j: usize| {
                    let y = load_block::<NIBBLES>(rows[j].add(b * block_bytes(NIBBLES)));
                    _mm256_madd_epi16(_mm256_maddubs_epi16(ax, _mm256_sign_epi8(y, x)), ones)
                };
                // Lanes of (0, 1, 2, 3) in each half, then (4, 5, 6, 7): halves added.
                let low = _mm256_hadd_epi32(_mm256_hadd_epi32(sums(0), sums(1)), _mm256_hadd_epi32(sums(2), sums(3)));
                let high = _mm256_hadd_epi32(_mm256_hadd_epi32(sums(4), sums(5)), _mm256_hadd_epi32(sums(6), sums(7)));
                let block = _mm256_add_epi32(_mm256_permute2x128_si256::<0x20>(low, high), _mm256_permute2x128_si256::<0x31>(low, high));
                let scales = _mm256_mul_ps(_mm256_set1_ps(sa), _mm256_i32gather_ps::<4>(w.scales.as_ptr().add(b), first_scales));
                acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(block), scales, acc);
            }
        }
        let mut out = [0f32; GROUP];
        // SAFETY: `out` is eight floats.
        unsafe { _mm256_storeu_ps(out.as_mut_ptr(), acc) };
        out
    }
}

#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod wasm {
    use super::{block_bytes, Group, Row, BLOCK, GROUP};
    use std::arch::wasm32::*;

    /// A block of A's 32 codes widened to i16, as each row of W's block meets it.
    struct Block([v128; 4]);

    impl Block {
        #[inline(always)]
        fn new(x: [v128; 2]) -> Block {
            Block([i16x8_extend_low_i8x16(x[0]), i16x8_extend_high_i8x16(x[0]), i16x8_extend_low_i8x16(x[1]), i16x8_extend_high_i8x16(x[1])])
        }

        /// The exact sum of the block's 32 products with `y`'s codes, in four i32 lanes.
        #[inline(always)]
        fn dot(&self, y: [v128; 2]) -> v128 {
            let x = &self.0;
            let low = i32x4_add(i32x4_dot_i16x8(x[0], i16x8_extend_low_i8x16(y[0])), i32x4_dot_i16x8(x[1], i16x8_extend_high_i8x16(y[0])));
            let high = i32x4_add(i32x4_dot_i16x8(x[2], i16x8_extend_low_i8x16(y[1])), i32x4_dot_i16x8(x[3], i16x8_extend_high_i8x16(y[1])));
            i32x4_add(low, high)
        }
    }

    /// A's 32 codes as two vectors.
    #[inline(always)]
    fn load(codes: &[i8; BLOCK]) -> [v128; 2] {
        // SAFETY: 32 readable bytes; v128_load has no alignment requirement.
        unsafe { [v128_load(codes.as_ptr().cast()), v128_load(codes[16..].as_ptr().cast())] }
    }

    /// Block `b` of a row of W as 32 signed codes in two vectors: q8's as they are, q4's
    /// nibbles (16 bytes, the lower nibble first) spread to bytes in order, less 8.
    #[inline(always)]
    fn load_block<const NIBBLES: bool>(row: &[u8], b: usize) -> [v128; 2] {
        let bytes = &row[b * block_bytes(NIBBLES)..][..block_bytes(NIBBLES)];
        // SAFETY: `bytes` holds the 32 or 16 bytes loaded; v128_load has no alignment requirement.
        unsafe {
            if !NIBBLES {
                return [v128_load(bytes.as_ptr().cast()), v128_load(bytes[16..].as_ptr().cast())];
            }
            let packed = v128_load(bytes.as_ptr().cast());
            let (low, high) = (v128_and(packed, u8x16_splat(0x0F)), u8x16_shr(packed, 4));
            let eight = i8x16_splat(8);
            [
                i8x16_sub(i8x16_shuffle::<0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23>(low, high), eight),
                i8x16_sub(i8x16_shuffle::<8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31>(low, high), eight),
            ]
        }
    }

    /// `dot_1x8` in 128-bit lanes: per block and row of W, two halves of 16 codes into four
    /// i32 lanes, converted and added by the blocks' scales; the lanes summed at the end.
    pub(super) fn dot_1x8<const NIBBLES: bool>(a: Row<'_>, w: &Group<'_>) -> [f32; GROUP] {
        let mut acc = [f32x4_splat(0.0); GROUP];
        for (b, (x, &sa)) in a.codes.as_chunks::<BLOCK>().0.iter().zip(a.scales).enumerate() {
            let block = Block::new(load(x));
            for ((acc, row), &first) in acc.iter_mut().zip(&w.rows).zip(&w.first_scales) {
                let sums = f32x4_convert_i32x4(block.dot(load_block::<NIBBLES>(row, b)));
                *acc = f32x4_add(*acc, f32x4_mul(sums, f32x4_splat(sa * w.scales[first + b])));
            }
        }
        acc.map(|v| (f32x4_extract_lane::<0>(v) + f32x4_extract_lane::<1>(v)) + (f32x4_extract_lane::<2>(v) + f32x4_extract_lane::<3>(v)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quantize::{dequantize_row, QuantFormat};
    use rand::{rngs::StdRng, Rng, SeedableRng};

    /// A's codes at random in −127..=127 (or W's bytes: q8 codes, or two q4 nibbles), with
    /// scales 1 or 2: every block sum, scale product and scaled sum is an integer, under 2^24
    /// for up to 8 blocks (8 · 32 · 127² · 4), so exact in f32 in any order, and each path must
    /// give the integer reference bit for bit.
    fn exact_rows(rng: &mut StdRng, rows: usize, blocks: usize, bytes_a_block: usize) -> (Vec<u8>, Vec<f32>) {
        let codes = (0..rows * blocks * bytes_a_block).map(|_| rng.random_range(-127..=127i8) as u8).collect();
        let scales = (0..rows * blocks).map(|_| if rng.random_bool(0.5) { 1.0 } else { 2.0 }).collect();
        (codes, scales)
    }

    /// Row n of A·Wᵀ in f64 from exact integer block sums, W's codes read by the library's f32
    /// decoder (`quantize::dequantize_row` with unit scales).
    fn reference(a: Row<'_>, w: &CodeRows<'_>, n: usize) -> f32 {
        let format = if w.nibbles { QuantFormat::Q4 } else { QuantFormat::Q8 };
        let words: Vec<u32> = bytemuck::pod_collect_to_vec(w.codes_of(n));
        let mut codes = vec![0f32; w.blocks * BLOCK];
        dequantize_row(format, &words, &vec![1.0; w.blocks], &mut codes);
        let mut exact = 0f64;
        for b in 0..a.scales.len() {
            let sum: i64 = (0..BLOCK).map(|j| a.codes[b * BLOCK + j] as i64 * codes[b * BLOCK + j] as i64).sum();
            exact += a.scales[b] as f64 * w.scales[n.min(w.rows - 1) * w.blocks + b] as f64 * sum as f64;
        }
        exact as f32
    }

    fn every_path_sums_the_blocks_of<const NIBBLES: bool>() {
        let mut rng = StdRng::seed_from_u64(7);
        // W of 8 rows, of 5 and of 13 (groups past N, a group after the first); up to 8 blocks
        // (exactness: `exact_rows`).
        for (blocks, rows) in [(1, 8), (2, 5), (5, 13), (8, 8)] {
            let (a_codes, a_scales) = exact_rows(&mut rng, 1, blocks, BLOCK);
            let (w_codes, w_scales) = exact_rows(&mut rng, rows, blocks, block_bytes(NIBBLES));
            let a_codes: Vec<i8> = bytemuck::cast_vec(a_codes);
            let a = Row { codes: &a_codes, scales: &a_scales };
            let w = CodeRows { codes: &w_codes, scales: &w_scales, rows, blocks, nibbles: NIBBLES };
            for g in 0..rows.div_ceil(GROUP) {
                let group = w.group(g);
                let want: [f32; GROUP] = std::array::from_fn(|j| reference(a, &w, g * GROUP + j));
                let what = format!("{}, {blocks} blocks, group {g}", if NIBBLES { "q4" } else { "q8" });
                assert_eq!(dot_1x8_portable::<NIBBLES>(a, &group), want, "plain loops, {what}");
                assert_eq!(dot_1x8::<NIBBLES>(a, &group), want, "the build's fastest path, {what}");
            }
        }
    }

    #[test]
    fn every_path_sums_the_blocks_exactly() {
        every_path_sums_the_blocks_of::<false>();
        every_path_sums_the_blocks_of::<true>();
    }

    #[test]
    fn extreme_codes_do_not_saturate() {
        // Every pair of products at ±127 · ±127: the largest i16 pair sums the AVX2 and
        // relaxed paths form, of both signs; and q4's extremes, −8 and 7 (nibbles 0 and 15).
        for (x, y) in [(127i8, 127i8), (-127, 127), (127, -127), (-127, -127)] {
            let (a_codes, w_codes) = (vec![x; BLOCK], vec![y as u8; GROUP * BLOCK]);
            let (a_scales, w_scales) = ([1f32], [1f32; GROUP]);
            let a = Row { codes: &a_codes, scales: &a_scales };
            let w = CodeRows { codes: &w_codes, scales: &w_scales, rows: GROUP, blocks: 1, nibbles: false };
            let want = (32 * x as i32 * y as i32) as f32;
            assert_eq!(dot_1x8::<false>(a, &w.group(0)), [want; GROUP], "{x} · {y}");
            for (nibble, y) in [(0u8, -8), (15, 7)] {
                let w_codes = vec![nibble * 17; GROUP * BLOCK / 2];
                let w = CodeRows { codes: &w_codes, nibbles: true, ..w };
                let want = (32 * x as i32 * y) as f32;
                assert_eq!(dot_1x8::<true>(a, &w.group(0)), [want; GROUP], "{x} · q4 {y}");
            }
        }
    }

    #[test]
    fn products_of_every_shape_match_the_reference() {
        let mut rng = StdRng::seed_from_u64(11);
        // One row and the most, N past a task and not a multiple of 8, K not of 32.
        let shapes = [(1, 5, 40), (3, 130, 64), (MAX_ROWS, 7, 33), (20, 17, 100)];
        for ((m, n, k), format) in shapes.into_iter().flat_map(|shape| [(shape, QuantFormat::Q8), (shape, QuantFormat::Q4)]) {
            let a: Vec<f32> = (0..m * k).map(|_| rng.random_range(-2.0..2.0)).collect();
            let weights: Vec<f32> = (0..n * k).map(|_| rng.random_range(-1.0..1.0)).collect();
            let q = crate::quantize::Quantized::quantize(format, &weights, n, k).unwrap();
            let w =
                CodeRows { codes: bytemuck::cast_slice(&q.words), scales: &q.scales, rows: n, blocks: k.div_ceil(BLOCK), nibbles: format == QuantFormat::Q4 };
            let bias: Vec<f32> = (0..n).map(|j| j as f32).collect();
            let rows = QuantizedRows::<i8>::new(None, &a, k, m, k).unwrap();
            let c_rs = n + 3;
            let mut c = vec![-1f32; m * c_rs];
            product(None, &rows, w, m, Target { c: &mut c, c_rs, bias: Some(&bias) }).unwrap();
            for i in 0..m {
                for j in 0..n {
                    let want = reference(rows.row(i), &w, j) + bias[j];
                    let got = c[i * c_rs + j];
                    assert!((got - want).abs() <= 1e-4 * (1.0 + want.abs()), "{m}×{n}×{k} [{i}, {j}]: {got} for {want}");
                }
                assert!(c[i * c_rs + n..][..3].iter().all(|&v| v == -1.0), "{m}×{n}×{k}: row {i} past N is untouched");
            }
        }
    }
}
