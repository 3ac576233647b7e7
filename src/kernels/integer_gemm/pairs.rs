//! The tiles of AVX2 CPUs without AVX-512: W's codes widened to i16 in strips of 16 rows, A
//! quantized to i16 codes, and tiles of 4 rows of A × 16 rows of W multiplied with AVX2's
//! 16-bit dot product of pairs (`vpmaddwd`): twice the multiply-adds of an f32 FMA of the same
//! width. The block sums are exact (32 products of codes within ±32767 and ±127: under 2^27).
//!
//! Why i16 activations and not int8 ones: without VNNI, int8 × int8 takes `vpmaddubsw`,
//! `vpmaddwd` and a sign fix for every 32 multiply-adds, as many multiplies as `vpmaddwd` alone
//! on i16 pairs, so the 16-bit codes cost nothing here and keep A at nearly f32's accuracy.
//!
//! A tile's sums, for each block: `sums[r][h]` holds rows r of A against rows 8h..8h + 8 of the
//! strip, one i32 lane a row of W; a broadcast pair of A's codes meets a vector of W's pairs.
//! In strip s, for block b and pair p (codes 2p and 2p + 1 of the block), the strip's 16 rows'
//! two codes side by side: `codes[s][(32b + 2p) · 16 + 2j + t]` = code 32b + 2p + t of row
//! 16s + j, and `values[s][16b + j]` that row's scale of block b.

use super::super::activation_codes::quantize_rows;
use super::{block_of, is_whole, scale_of, strip_rows, CodeRows, Kept, Layout, Strip, TileRows, TileSums, TileTarget, BLOCK, MAX_STRIP};
use std::cell::Cell;
use std::thread::LocalKey;

/// Rows of W a strip (a tile's width) holds.
const STRIP: usize = 16;

/// Rows of A a tile holds: 4 × 16 takes 8 vectors of i32 sums and 8 of f32 results, with two
/// of W and a broadcast of A, of AVX2's 16 registers.
const TILE_ROWS: usize = 4;

/// Whether the CPU has these tiles' fast path.
pub(super) fn available() -> bool {
    std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
}

thread_local! {
    /// The calling thread's strips of W, kept between calls.
    static STRIPS: Cell<Kept<i16>> = const { Cell::new((Vec::new(), Vec::new())) };
    /// A task's band of A's rows quantized, kept between calls.
    static BAND: Cell<Kept<i16>> = const { Cell::new((Vec::new(), Vec::new())) };
}

/// The pairs' layout.
pub(super) struct Pairs;

impl Layout for Pairs {
    type Code = i16;
    const STRIP: usize = STRIP;
    const TILE_ROWS: usize = TILE_ROWS;
    const BLOCK_VALUES: usize = STRIP;

    fn kept() -> [&'static LocalKey<Cell<Kept<i16>>>; 2] {
        [&STRIPS, &BAND]
    }

    fn pack_strip(w: &CodeRows<'_>, first: usize, codes: &mut [i16], values: &mut [f32]) {
        let rows = strip_rows::<STRIP>(w, first);
        let fast = available();
        for (b, (codes, scales)) in codes.as_chunks_mut::<{ BLOCK * STRIP }>().0.iter_mut().zip(values.chunks_exact_mut(STRIP)).enumerate() {
            let block = rows.map(|row| block_of(row, b, w.nibbles));
            if fast {
                // SAFETY: the CPU has AVX2, checked above.
                unsafe { x86::interleave_pairs(&block, codes) };
            } else {
                interleave_pairs_portable(&block, codes);
            }
            for (j, scale) in scales.iter_mut().enumerate() {
                *scale = scale_of(w, first + j, b);
            }
        }
    }

    fn quantize_band(a: &[f32], a_rs: usize, k: usize, codes: &mut [i16], scales: &mut [f32]) {
        quantize_rows(a, a_rs, k, codes, scales);
    }

    fn tile(a: TileRows<'_, i16>, w: Strip<'_, i16>, target: TileTarget<'_>) {
        // No construction here makes rows or targets of other lengths, but the fast path's
        // loads and stores rely on it, so it is never handed any.
        if is_whole::<Self>(&a, &w, &target) && available() {
            // SAFETY: the CPU has AVX2 and FMA, checked just above, and the rows and target are whole.
            return unsafe { x86::tile_product(a, w, target) };
        }
        target.store(&Self::tile_portable(a, w));
    }

    fn tile_portable(a: TileRows<'_, i16>, w: Strip<'_, i16>) -> TileSums {
        let row_codes = a.blocks * BLOCK;
        let mut sums = [[0f32; MAX_STRIP]; super::MAX_TILE_ROWS];
        for (r, sums) in sums.iter_mut().enumerate().take(TILE_ROWS) {
            for (j, acc) in sums.iter_mut().enumerate().take(STRIP) {
                for b in 0..a.blocks {
                    let sum: i32 = (0..BLOCK)
                        .map(|i| a.codes[r * row_codes + b * BLOCK + i] as i32 * w.codes[(b * BLOCK + i - i % 2) * STRIP + 2 * j + i % 2] as i32)
                        .sum();
                    *acc += sum as f32 * (a.scales[r * a.blocks + b] * w.values[b * STRIP + j]);
                }
            }
        }
        sums
    }
}

/// One block of the strip's 16 rows of W as a strip holds it: `codes[(16p + j) · 2 + t]` =
/// `block[j][2p + t]`, the pairs of every row side by side (a 16 × 16 transpose of pairs).
fn interleave_pairs_portable(block: &[[i8; BLOCK]; STRIP], codes: &mut [i16; BLOCK * STRIP]) {
    for (j, row) in block.iter().enumerate() {
        for (p, pair) in row.chunks_exact(2).enumerate() {
            codes[(p * STRIP + j) * 2] = pair[0].into();
            codes[(p * STRIP + j) * 2 + 1] = pair[1].into();
        }
    }
}

mod x86 {
    use super::super::MAX_TILE_ROWS;
    use super::{Strip, TileRows, TileTarget, BLOCK, MAX_STRIP, STRIP, TILE_ROWS};
    use std::arch::x86_64::*;

    /// `Pairs::tile` with AVX2: per pair of A's codes, broadcast, `vpmaddwd` with the strip's
    /// two vectors of pairs into the row's two vectors of i32 sums; per block, the sums
    /// converted and added by the blocks' scales (FMA) to the results; the bias added as they
    /// are stored, from the registers where the strip is whole.
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA; `a`, `w` and `target` are whole (`integer_gemm::is_whole`).
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn tile_product(a: TileRows<'_, i16>, w: Strip<'_, i16>, target: TileTarget<'_>) {
        let blocks = w.blocks;
        let rows: [*const i16; TILE_ROWS] = std::array::from_fn(|r| a.codes[r * blocks * BLOCK..].as_ptr());
        let mut acc = [[_mm256_setzero_ps(); 2]; TILE_ROWS];
        for b in 0..blocks {
            let mut sums = [[_mm256_setzero_si256(); 2]; TILE_ROWS];
            for pair in (b * BLOCK..(b + 1) * BLOCK).step_by(2) {
                // SAFETY: pair + 1 < blocks · 32 and the strip has 16 codes of each: the
                // caller's promise; loadu and read_unaligned have no alignment requirement.
                unsafe {
                    let codes = w.codes.as_ptr().add(pair * STRIP);
                    let halves = [_mm256_loadu_si256(codes.cast()), _mm256_loadu_si256(codes.add(STRIP).cast())];
                    for (sums, row) in sums.iter_mut().zip(rows) {
                        let x = _mm256_set1_epi32(row.add(pair).cast::<i32>().read_unaligned());
                        sums[0] = _mm256_add_epi32(sums[0], _mm256_madd_epi16(x, halves[0]));
                        sums[1] = _mm256_add_epi32(sums[1], _mm256_madd_epi16(x, halves[1]));
                    }
                }
            }
            // SAFETY: the strip has 16 scales of block b, each row a scale of it.
            unsafe {
                let scales = w.values.as_ptr().add(b * STRIP);
                let sw = [_mm256_loadu_ps(scales), _mm256_loadu_ps(scales.add(8))];
                for (r, (acc, sums)) in acc.iter_mut().zip(sums).enumerate() {
                    let sa = _mm256_set1_ps(*a.scales.get_unchecked(r * blocks + b));
                    for h in 0..2 {
                        acc[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums[h]), _mm256_mul_ps(sa, sw[h]), acc[h]);
                    }
                }
            }
        }
        if target.width < STRIP {
            // The last strip of a W whose rows are not a multiple of 16.
            let mut sums = [[0f32; MAX_STRIP]; MAX_TILE_ROWS];
            for (sums, acc) in sums.iter_mut().zip(acc) {
                // SAFETY: each row of `sums` is 16 floats.
                unsafe {
                    _mm256_storeu_ps(sums.as_mut_ptr(), acc[0]);
                    _mm256_storeu_ps(sums.as_mut_ptr().add(8), acc[1]);
                }
            }
            return target.store(&sums);
        }
        // SAFETY: the bias has 16 floats, and C 16 from each of the target's rows (whole).
        unsafe {
            let bias = [_mm256_loadu_ps(target.bias.as_ptr()), _mm256_loadu_ps(target.bias.as_ptr().add(8))];
            for (r, acc) in acc.iter().enumerate().take(target.rows) {
                let out = target.c.as_mut_ptr().add(r * target.c_rs);
                _mm256_storeu_ps(out, _mm256_add_ps(acc[0], bias[0]));
                _mm256_storeu_ps(out.add(8), _mm256_add_ps(acc[1], bias[1]));
            }
        }
    }

    /// `interleave_pairs_portable` with AVX2: each row's 32 codes widened to 16 pairs (one
    /// i32 lane a pair, two vectors), then four 8 × 8 transposes of those lanes.
    ///
    /// # Safety
    /// The CPU has AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn interleave_pairs(block: &[[i8; BLOCK]; STRIP], codes: &mut [i16; BLOCK * STRIP]) {
        // rows[j][h]: row j's pairs 8h..8h + 8.
        let rows: [[__m256i; 2]; STRIP] = std::array::from_fn(|j| {
            // SAFETY: each row of the block is 32 bytes; loadu has no alignment requirement.
            let bytes = unsafe { _mm256_loadu_si256(block[j].as_ptr().cast()) };
            [_mm256_cvtepi8_epi16(_mm256_castsi256_si128(bytes)), _mm256_cvtepi8_epi16(_mm256_extracti128_si256::<1>(bytes))]
        });
        let out = codes.as_mut_ptr().cast::<i32>();
        // Pairs 8h..8h + 8 of rows 8g..8g + 8.
        for (h, g) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
            let columns = transpose8(std::array::from_fn(|r| rows[8 * g + r][h]));
            for (q, column) in columns.into_iter().enumerate() {
                // SAFETY: pair 8h + q of rows 8g..8g + 8: 8 of the 256 i32s of `codes`.
                unsafe { _mm256_storeu_si256(out.add((8 * h + q) * STRIP + 8 * g).cast(), column) };
            }
        }
    }

    /// The transpose of 8 rows of 8 i32 lanes: lane r of result q is lane q of row r.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn transpose8(r: [__m256i; 8]) -> [__m256i; 8] {
        // Pairs of rows interleaved, then pairs of pairs: each 128-bit half holds 4 rows' lane q (low half) or q + 4.
        let t = [0, 2, 4, 6].map(|i| [_mm256_unpacklo_epi32(r[i], r[i + 1]), _mm256_unpackhi_epi32(r[i], r[i + 1])]);
        let u = [0, 2].map(|i| {
            [
                _mm256_unpacklo_epi64(t[i][0], t[i + 1][0]),
                _mm256_unpackhi_epi64(t[i][0], t[i + 1][0]),
                _mm256_unpacklo_epi64(t[i][1], t[i + 1][1]),
                _mm256_unpackhi_epi64(t[i][1], t[i + 1][1]),
            ]
        });
        std::array::from_fn(|q| {
            let (low, high) = (u[0][q % 4], u[1][q % 4]);
            if q < 4 {
                _mm256_permute2x128_si256::<0x20>(low, high)
            } else {
                _mm256_permute2x128_si256::<0x31>(low, high)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::activation_codes::QuantizedRows;
    use super::super::tests::{buffers, code_rows, fastest_sums, reference};
    use super::super::Strips;
    use super::*;
    use rand::{rngs::StdRng, Rng, SeedableRng};

    /// Every path's tiles against the reference: with A's codes within ±127 and scales 1 or 2,
    /// every sum is an integer under 2^24 (8 blocks · 32 · 127² · 4), exact in f32 in any
    /// order, so bit for bit; with codes over all of i16, within f32's rounding of the blocks'
    /// scaled sums (a layout's error would be as large as the sums).
    #[test]
    fn every_path_multiplies_tiles_as_the_reference() {
        let mut rng = StdRng::seed_from_u64(5);
        for (a_largest, exact) in [(127i16, true), (i16::MAX, false)] {
            for ((blocks, rows), nibbles) in [(1, 16), (3, 5), (8, 37)].into_iter().flat_map(|shape| [(shape, false), (shape, true)]) {
                let (w_codes, w_scales) = code_rows(&mut rng, rows, blocks, nibbles);
                let w = CodeRows { codes: &w_codes, scales: &w_scales, rows, blocks, nibbles };
                let a = QuantizedRows {
                    codes: (0..TILE_ROWS * blocks * BLOCK).map(|_| rng.random_range(-a_largest..=a_largest)).collect(),
                    scales: (0..TILE_ROWS * blocks).map(|_| if rng.random_bool(0.5) { 1.0 } else { 2.0 }).collect(),
                    blocks,
                };
                let mut buffers = buffers::<Pairs>(&w, 77);
                let strips = Strips::pack::<Pairs>(None, w, &mut buffers.0, &mut buffers.1).unwrap();
                let tile = TileRows { codes: &a.codes, scales: &a.scales, blocks };
                for s in 0..strips.count {
                    let strip = strips.strip::<Pairs>(s);
                    let paths = [("plain loops", Pairs::tile_portable(tile, strip)), ("the CPU's fastest path", fastest_sums::<Pairs>(tile, strip))];
                    for (path, sums) in paths {
                        for (r, j) in (0..TILE_ROWS).flat_map(|r| (0..STRIP.min(rows - s * STRIP)).map(move |j| (r, j))) {
                            let (got, want) = (sums[r][j], reference(&a, r, &w, s * STRIP + j));
                            let what = format!("{path}, ±{a_largest}, nibbles {nibbles}, {blocks} blocks, strip {s}, [{r}, {j}]");
                            if exact {
                                assert_eq!(got as f64, want, "{what}");
                            } else {
                                // A rounding of f32 at each of the blocks' sums, each under 2^29.
                                let bound = blocks as f64 * 2f64.powi(29) * f32::EPSILON as f64;
                                assert!((got as f64 - want).abs() <= bound, "{what}: {got} for {want}");
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn every_path_interleaves_pairs_as_a_strip_holds_them() {
        let mut rng = StdRng::seed_from_u64(8);
        let block: [[i8; BLOCK]; STRIP] = std::array::from_fn(|_| std::array::from_fn(|_| rng.random_range(-128..=127)));
        let mut portable = [77; BLOCK * STRIP];
        interleave_pairs_portable(&block, &mut portable);
        let mut paths = vec![("plain loops", portable)];
        if available() {
            let mut fast = [77; BLOCK * STRIP];
            // SAFETY: the CPU has AVX2, checked just above.
            unsafe { x86::interleave_pairs(&block, &mut fast) };
            paths.push(("AVX2", fast));
        }
        for (path, codes) in paths {
            for (j, p, t) in (0..STRIP).flat_map(|j| (0..BLOCK / 2).flat_map(move |p| [(j, p, 0), (j, p, 1)])) {
                assert_eq!(codes[(p * STRIP + j) * 2 + t], block[j][2 * p + t] as i16, "{path}: row {j}, pair {p}, code {t}");
            }
        }
    }

    #[test]
    fn extreme_codes_do_not_overflow() {
        // ±32767 · ±127 in every product of a block: 32 · 4161409 ≈ 1.3 · 2^27 in each sum,
        // exact in f32 (an odd 22-bit number times 32).
        for (x, y) in [(i16::MAX, 127i8), (-i16::MAX, 127), (i16::MAX, -127), (-i16::MAX, -127)] {
            let w_codes = vec![y as u8; STRIP * BLOCK];
            let w = CodeRows { codes: &w_codes, scales: &[1.0; STRIP], rows: STRIP, blocks: 1, nibbles: false };
            let (a_codes, a_scales) = (vec![x; TILE_ROWS * BLOCK], [1.0; TILE_ROWS]);
            let tile = TileRows { codes: &a_codes, scales: &a_scales, blocks: 1 };
            let want = (32 * x as i32 * y as i32) as f32;
            let mut buffers = buffers::<Pairs>(&w, 77);
            let strips = Strips::pack::<Pairs>(None, w, &mut buffers.0, &mut buffers.1).unwrap();
            let sums = fastest_sums::<Pairs>(tile, strips.strip::<Pairs>(0));
            assert!(sums[..TILE_ROWS].iter().all(|row| row[..STRIP] == [want; STRIP]), "{x} · {y}");
        }
    }
}
