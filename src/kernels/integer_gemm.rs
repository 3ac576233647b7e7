//! The integer product of many rows of A (from [`MIN_ROWS`]: sentences and batches, where
//! multiply-adds, not reading W, are what the product costs): W's q8 or q4 codes widened to
//! i16 once a call into strips of 16 rows, A quantized to i16 in the blocks of 32 the weights
//! use a band of rows at a time, and tiles of 4 rows of A × 16 rows of W multiplied with
//! AVX2's 16-bit dot product of pairs (`vpmaddwd`): twice the multiply-adds of an f32 FMA of
//! the same width. x86-64 only for now: the same tiles in wasm SIMD (`i32x4.dot_i16x8_s`,
//! half a strip at a time) ran MiniLM 32 × 128 in Chromium 3× slower than f32 (8.4 s against
//! 2.8, the wasm build at opt-level "s"; BENCHMARKS.md). The block sums are exact int32s (32
//! products of codes within ±32767 and ±127: under 2^27), each scaled once by the two blocks'
//! scales:
//!
//! C[m, n] = Σ_b sa[m, b] · sw[n, b] · Σ_{j < 32} qa[m, 32b + j] · qw[n, 32b + j]
//!
//! Why i16 activations and not int8 ones: without VNNI, int8 × int8 takes `vpmaddubsw`,
//! `vpmaddwd` and a sign fix for every 32 multiply-adds, as many multiplies as `vpmaddwd` alone
//! on i16 pairs, so the 16-bit codes cost nothing here and keep A at nearly f32's accuracy.
//!
//! A tile's sums, for each block: `sums[r][h]` holds rows r of A against rows 8h..8h + 8 of the
//! strip, one i32 lane a row of W; a broadcast pair of A's codes meets a vector of W's pairs.

use super::activation_codes::quantize_rows;
use super::int8::{block_codes, CodeRows, Target};
use super::{each_chunk, each_chunk_pair, pieces, scratch, Threads};
use crate::error::Result;
use crate::quantize::BLOCK;
use std::cell::Cell;
use std::thread::LocalKey;

/// Rows of W a strip (a tile's width) holds.
const STRIP: usize = 16;

/// Rows of A a tile holds: 4 × 16 takes 8 vectors of i32 sums and 8 of f32 results, with two
/// of W and a broadcast of A, of AVX2's 16 registers.
const TILE_ROWS: usize = 4;

/// The most rows of A a task takes: 64 rows of i16 codes (48–192 KB for K of 384–1536) stay
/// in the L2 cache while every strip of W passes them.
const BAND_ROWS: usize = 64;

/// The fewest rows of A the tiles take: every product past `int8::MAX_ROWS`. W is widened
/// into strips at every call, which costs what the product of about 30 rows does: measured
/// natively on 2 threads (`bench kernels --only matmul_q8`, 2026-11-30), 31 × 768 × 3072 took
/// 1.5–2.0 ms through the tiles and 1.9–2.0 through `int8`'s rows, 128 × 768 × 3072 3.5–4.2
/// through the tiles and 8.7 in f32 over decoded panels.
pub(super) const MIN_ROWS: usize = super::int8::MAX_ROWS + 1;

/// Whether the CPU has the tiles' fast path; where not, `kernels::quantized` keeps long
/// products on f32 over decoded panels of W (gemm), faster than plain loops.
pub(super) fn available() -> bool {
    std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
}

/// Whether the tiles beat f32 over decoded panels on this CPU: where it has AVX-512, gemm's
/// f32 runs at twice the tiles' width and wins. Measured on 2 threads of an Intel Xeon with
/// AVX-512 (`bench kernels --only matmul`, 2026-11-30): 4096 × 384 × 1536 took 51 ms through
/// the tiles and 20 in f32, 128 × 768 × 3072 6.9 and 4.3.
pub(super) fn faster_than_f32() -> bool {
    available() && !std::arch::is_x86_feature_detected!("avx512f")
}

/// Codes and their blocks' scales: a buffer pair [`with_kept`] keeps.
type CodesAndScales = (Vec<i16>, Vec<f32>);

thread_local! {
    /// The calling thread's strips of W ([`Strips`]), kept between calls.
    static STRIPS: Cell<CodesAndScales> = const { Cell::new((Vec::new(), Vec::new())) };
    /// A task's band of A's rows quantized, kept between calls.
    static BAND: Cell<CodesAndScales> = const { Cell::new((Vec::new(), Vec::new())) };
}

/// Bytes of a (codes, scales) pair [`with_kept`] keeps for the next call, each pair apart: the
/// widest layer of BERT-large's widened (4096 × 1024 i16: 8 MiB), not an LM head's (GPT-2's
/// 50257 × 768: 74 MiB).
const KEPT_BYTES: usize = 16 << 20;

/// Runs `work` on `lens` codes and scales of buffers this thread keeps between calls in
/// `kept` (up to [`KEPT_BYTES`]), so that a product called at every layer does not fault in and
/// zero fresh pages each time (1 ms a call for MiniLM's widest weights, measured with fresh
/// buffers). The values are what the last call left: `work` writes each before it reads it.
fn with_kept<R>(
    kept: &'static LocalKey<Cell<CodesAndScales>>,
    (codes_len, scales_len): (usize, usize),
    work: impl FnOnce(&mut [i16], &mut [f32]) -> Result<R>,
) -> Result<R> {
    // A kept buffer too short for this call is freed before its replacement is made.
    fn at_least<T: Copy + Default>(kept: Vec<T>, len: usize) -> Result<Vec<T>> {
        if kept.len() >= len {
            return Ok(kept);
        }
        drop(kept);
        scratch(len)
    }
    let (codes, scales) = kept.take();
    let (mut codes, mut scales) = (at_least(codes, codes_len)?, at_least(scales, scales_len)?);
    let result = work(&mut codes[..codes_len], &mut scales[..scales_len]);
    if size_of_val(codes.as_slice()) + size_of_val(scales.as_slice()) <= KEPT_BYTES {
        kept.set((codes, scales));
    }
    result
}

/// W's codes widened to i16 in strips of 16 rows. In strip s, for block b and pair p (codes
/// 2p and 2p + 1 of the block), the strip's 16 rows' two codes side by side:
/// `codes[s][(32b + 2p) · 16 + 2j + t]` = code 32b + 2p + t of row 16s + j, and
/// `scales[s][16b + j]` that row's scale of block b; rows past N (`rows`) are zeros.
struct Strips<'a> {
    codes: &'a [i16],
    scales: &'a [f32],
    rows: usize,
    blocks: usize,
    count: usize,
}

/// One strip of [`Strips`].
#[derive(Clone, Copy)]
struct Strip<'a> {
    codes: &'a [i16],
    scales: &'a [f32],
}

impl<'a> Strips<'a> {
    /// Values of `codes` and `scales` that W's strips take.
    fn lens(w: &CodeRows<'_>) -> (usize, usize) {
        let count = w.rows.div_ceil(STRIP);
        (count * w.blocks * BLOCK * STRIP, count * w.blocks * STRIP)
    }

    /// W widened into `codes` and `scales` (of [`Strips::lens`]; every value written).
    fn widen(threads: Option<Threads<'_>>, w: CodeRows<'_>, codes: &'a mut [i16], scales: &'a mut [f32]) -> Result<Strips<'a>> {
        let (count, blocks) = (w.rows.div_ceil(STRIP), w.blocks);
        let fast = available();
        each_chunk_pair(threads, (codes, blocks * BLOCK * STRIP), (scales, blocks * STRIP), |s, codes, scales| {
            let rows: [Option<&[u8]>; STRIP] = std::array::from_fn(|j| (s * STRIP + j < w.rows).then(|| w.codes_of(s * STRIP + j)));
            for (b, (codes, scales)) in codes.as_chunks_mut::<{ BLOCK * STRIP }>().0.iter_mut().zip(scales.chunks_exact_mut(STRIP)).enumerate() {
                let block: [[i8; BLOCK]; STRIP] = std::array::from_fn(|j| match rows[j] {
                    Some(row) if w.nibbles => block_codes::<true>(row, b),
                    Some(row) => block_codes::<false>(row, b),
                    None => [0; BLOCK],
                });
                if fast {
                    // SAFETY: the CPU has AVX2, checked above.
                    unsafe { x86::interleave_pairs(&block, codes) };
                } else {
                    interleave_pairs_portable(&block, codes);
                }
                for (j, scale) in scales.iter_mut().enumerate() {
                    *scale = rows[j].map_or(0.0, |_| w.scales[(s * STRIP + j) * blocks + b]);
                }
            }
            Ok(())
        })?;
        Ok(Strips { codes, scales, rows: w.rows, blocks, count })
    }

    fn strip(&self, s: usize) -> Strip<'_> {
        let (codes, scales) = (self.blocks * BLOCK * STRIP, self.blocks * STRIP);
        Strip { codes: &self.codes[s * codes..][..codes], scales: &self.scales[s * scales..][..scales] }
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

/// Four rows of A (past M, the last again: computed and dropped): codes and scales of each.
struct TileRows<'a> {
    codes: [&'a [i16]; TILE_ROWS],
    scales: [&'a [f32]; TILE_ROWS],
}

/// A tile's results: 4 rows of A × the strip's 16 rows of W.
type TileSums = [[f32; STRIP]; TILE_ROWS];

/// Where a tile's results go: its first `rows` rows (1 to 4) into C from the strip's first
/// column, `c_rs` apart, each the strip's first `width` sums plus the strip's bias.
struct TileTarget<'a> {
    c: &'a mut [f32],
    c_rs: usize,
    rows: usize,
    width: usize,
    bias: &'a [f32; STRIP],
}

impl TileTarget<'_> {
    /// Whether `c` holds every value the tile stores (the fast paths' stores rely on it).
    fn is_whole(&self) -> bool {
        (1..=TILE_ROWS).contains(&self.rows) && self.width <= STRIP && self.c.len() >= (self.rows - 1) * self.c_rs + self.width
    }

    /// `sums` plus the bias, stored.
    fn store(self, sums: &TileSums) {
        for (r, sums) in sums.iter().enumerate().take(self.rows) {
            let out = &mut self.c[r * self.c_rs..][..self.width];
            for ((value, &sum), &bias) in out.iter_mut().zip(sums).zip(self.bias) {
                *value = sum + bias;
            }
        }
    }
}

/// C = A · Wᵀ (+ bias) for rows 0..m of `a` (stride `a_rs`, K values each): W widened into
/// strips, bands of A's rows over threads, each band quantized to i16 codes (as
/// `activation_codes` quantizes) and passing every strip in tiles.
pub(super) fn product(threads: Option<Threads<'_>>, (a, a_rs, k): (&[f32], usize, usize), w: CodeRows<'_>, m: usize, target: Target<'_>) -> Result<()> {
    let Target { c, c_rs, bias } = target;
    let (n, blocks) = (w.rows, w.blocks);
    if m == 0 || n == 0 {
        return Ok(());
    }
    with_kept(&STRIPS, Strips::lens(&w), |codes, scales| {
        let strips = Strips::widen(threads, w, codes, scales)?;
        let band = m.div_ceil(pieces(threads, m, TILE_ROWS)).next_multiple_of(TILE_ROWS).min(BAND_ROWS);
        each_chunk(threads, &mut c[..(m - 1) * c_rs + n], band * c_rs, |t, out| {
            let rows = band.min(m - t * band);
            with_kept(&BAND, (rows * blocks * BLOCK, rows * blocks), |codes, scales| {
                quantize_rows(&a[t * band * a_rs..], a_rs, k, codes, scales);
                band_product((codes, scales, rows), &strips, Target { c: out, c_rs, bias });
                Ok(())
            })
        })
    })
}

/// C's rows of one band of A (its codes, scales and rows) against every strip of W, in tiles.
fn band_product((codes, scales, rows): (&[i16], &[f32], usize), strips: &Strips<'_>, target: Target<'_>) {
    let Target { c, c_rs, bias } = target;
    let blocks = strips.blocks;
    let row = |i: usize| (&codes[i * blocks * BLOCK..][..blocks * BLOCK], &scales[i * blocks..][..blocks]);
    for s in 0..strips.count {
        let (first, width) = (s * STRIP, STRIP.min(strips.rows - s * STRIP));
        // The strip's bias, zeros where there is none (or past N), added as each tile is stored.
        let strip_bias: [f32; STRIP] = std::array::from_fn(|j| bias.filter(|_| j < width).map_or(0.0, |bias| bias[first + j]));
        for tile in (0..rows).step_by(TILE_ROWS) {
            let parts: [_; TILE_ROWS] = std::array::from_fn(|r| row((tile + r).min(rows - 1)));
            let target = TileTarget { c: &mut c[tile * c_rs + first..], c_rs, rows: TILE_ROWS.min(rows - tile), width, bias: &strip_bias };
            tile_product(&TileRows { codes: parts.map(|p| p.0), scales: parts.map(|p| p.1) }, strips.strip(s), target);
        }
    }
}

/// One tile into C, on the fastest path this build and CPU have: its sums plus the bias
/// stored where `target` says.
#[inline]
fn tile_product(a: &TileRows<'_>, w: Strip<'_>, target: TileTarget<'_>) {
    let blocks = w.scales.len() / STRIP;
    let whole = w.codes.len() == blocks * BLOCK * STRIP && a.codes.iter().zip(&a.scales).all(|(c, s)| c.len() == blocks * BLOCK && s.len() == blocks);
    // No construction here makes rows or targets of other lengths, but the fast paths' loads
    // and stores rely on it, so they are never handed any.
    if whole && target.is_whole() && available() {
        // SAFETY: the CPU has AVX2 and FMA, checked just above, and the rows and target are whole.
        return unsafe { x86::tile_product(a, w, target) };
    }
    target.store(&tile_product_portable(a, w));
}

/// The plain-loop path (the reference the others match): every block's exact sum, scaled and
/// added in order.
fn tile_product_portable(a: &TileRows<'_>, w: Strip<'_>) -> TileSums {
    std::array::from_fn(|r| {
        std::array::from_fn(|j| {
            let mut acc = 0f32;
            for (b, &sa) in a.scales[r].iter().enumerate() {
                let sum: i32 = (0..BLOCK).map(|i| a.codes[r][b * BLOCK + i] as i32 * w.codes[(b * BLOCK + i - i % 2) * STRIP + 2 * j + i % 2] as i32).sum();
                acc += sum as f32 * (sa * w.scales[b * STRIP + j]);
            }
            acc
        })
    })
}

mod x86 {
    use super::{Strip, TileRows, TileTarget, BLOCK, STRIP, TILE_ROWS};
    use std::arch::x86_64::*;

    /// `tile_product` with AVX2: per pair of A's codes, broadcast, `vpmaddwd` with the strip's
    /// two vectors of pairs into the row's two vectors of i32 sums; per block, the sums
    /// converted and added by the blocks' scales (FMA) to the results; the bias added as they
    /// are stored, from the registers where the strip is whole.
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA; each of A's rows has `w.scales.len() / 16` blocks of codes
    /// and as many scales, `w` its whole strip, and `target` is whole (`TileTarget::is_whole`).
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn tile_product(a: &TileRows<'_>, w: Strip<'_>, target: TileTarget<'_>) {
        let blocks = w.scales.len() / STRIP;
        let rows = a.codes.map(|r| r.as_ptr());
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
                let scales = w.scales.as_ptr().add(b * STRIP);
                let sw = [_mm256_loadu_ps(scales), _mm256_loadu_ps(scales.add(8))];
                for ((acc, sums), row_scales) in acc.iter_mut().zip(sums).zip(a.scales) {
                    let sa = _mm256_set1_ps(*row_scales.get_unchecked(b));
                    for h in 0..2 {
                        acc[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums[h]), _mm256_mul_ps(sa, sw[h]), acc[h]);
                    }
                }
            }
        }
        if target.width < STRIP {
            // The last strip of a W whose rows are not a multiple of 16.
            let mut sums = [[0f32; STRIP]; TILE_ROWS];
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
    use super::super::activation_codes::QuantizedRows;
    use super::*;
    use crate::quantize::{QuantFormat, Quantized};
    use rand::{rngs::StdRng, Rng, SeedableRng};

    /// W of `rows` rows and `blocks` blocks at random: q8 bytes, or q4's nibble pairs.
    fn code_rows(rng: &mut StdRng, rows: usize, blocks: usize, nibbles: bool) -> (Vec<u8>, Vec<f32>) {
        let bytes = rows * blocks * if nibbles { BLOCK / 2 } else { BLOCK };
        let codes = (0..bytes).map(|_| rng.random_range(-127..=127i8) as u8).collect();
        let scales = (0..rows * blocks).map(|_| if rng.random_bool(0.5) { 1.0 } else { 2.0 }).collect();
        (codes, scales)
    }

    /// Buffers for W's strips, holding what no widening writes (it must write every value).
    fn buffers(w: &CodeRows<'_>) -> (Vec<i16>, Vec<f32>) {
        let (codes, scales) = Strips::lens(w);
        (vec![77; codes], vec![f32::NAN; scales])
    }

    /// A tile's sums through `tile_product` (the build's fastest path), stored with no bias.
    fn fastest_sums(a: &TileRows<'_>, w: Strip<'_>) -> TileSums {
        let mut sums = [[f32::NAN; STRIP]; TILE_ROWS];
        tile_product(a, w, TileTarget { c: sums.as_flattened_mut(), c_rs: STRIP, rows: TILE_ROWS, width: STRIP, bias: &[0.0; STRIP] });
        sums
    }

    /// Row n of A·Wᵀ for A's row i in f64, from exact integer block sums (W's codes by the
    /// library's plain-loop decoder `block_codes`).
    fn reference(a: &QuantizedRows<i16>, i: usize, w: &CodeRows<'_>, n: usize) -> f64 {
        (0..w.blocks)
            .map(|b| {
                let codes = if w.nibbles { block_codes::<true>(w.codes_of(n), b) } else { block_codes::<false>(w.codes_of(n), b) };
                let sum: i64 = (0..BLOCK).map(|j| a.codes[(i * w.blocks + b) * BLOCK + j] as i64 * codes[j] as i64).sum();
                a.scales[i * w.blocks + b] as f64 * w.scales[n * w.blocks + b] as f64 * sum as f64
            })
            .sum()
    }

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
                let mut buffers = buffers(&w);
                let strips = Strips::widen(None, w, &mut buffers.0, &mut buffers.1).unwrap();
                let tile = TileRows {
                    codes: std::array::from_fn(|r| &a.codes[r * blocks * BLOCK..][..blocks * BLOCK]),
                    scales: std::array::from_fn(|r| &a.scales[r * blocks..][..blocks]),
                };
                for s in 0..strips.count {
                    let paths =
                        [("plain loops", tile_product_portable(&tile, strips.strip(s))), ("the build's fastest path", fastest_sums(&tile, strips.strip(s)))];
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
            let a_codes = vec![x; BLOCK];
            let tile = TileRows { codes: [&a_codes; TILE_ROWS], scales: [&[1.0]; TILE_ROWS] };
            let want = (32 * x as i32 * y as i32) as f32;
            let mut buffers = buffers(&w);
            let strips = Strips::widen(None, w, &mut buffers.0, &mut buffers.1).unwrap();
            assert_eq!(fastest_sums(&tile, strips.strip(0)), [[want; STRIP]; TILE_ROWS], "{x} · {y}");
        }
    }

    #[test]
    fn products_of_every_shape_match_the_reference() {
        let mut rng = StdRng::seed_from_u64(13);
        // M under a tile, past a band and not a multiple of 4; N under a strip and past one;
        // K not a multiple of 32; each product after a larger one (the kept buffers hold what
        // it left).
        let shapes = [(3, 5, 40), (70, 33, 64), (9, 16, 100)];
        for ((m, n, k), format) in shapes.into_iter().flat_map(|shape| [(shape, QuantFormat::Q8), (shape, QuantFormat::Q4)]) {
            let a: Vec<f32> = (0..m * k).map(|_| rng.random_range(-2.0..2.0)).collect();
            let weights: Vec<f32> = (0..n * k).map(|_| rng.random_range(-1.0..1.0)).collect();
            let q = Quantized::quantize(format, &weights, n, k).unwrap();
            let w =
                CodeRows { codes: bytemuck::cast_slice(&q.words), scales: &q.scales, rows: n, blocks: k.div_ceil(BLOCK), nibbles: format == QuantFormat::Q4 };
            let bias: Vec<f32> = (0..n).map(|j| j as f32).collect();
            let rows = QuantizedRows::<i16>::new(None, &a, k, m, k).unwrap();
            let c_rs = n + 3;
            let mut c = vec![-1f32; m * c_rs];
            product(None, (&a, k, k), w, m, Target { c: &mut c, c_rs, bias: Some(&bias) }).unwrap();
            for i in 0..m {
                for j in 0..n {
                    let want = reference(&rows, i, &w, j) as f32 + bias[j];
                    let got = c[i * c_rs + j];
                    assert!((got - want).abs() <= 1e-4 * (1.0 + want.abs()), "{m}×{n}×{k} [{i}, {j}]: {got} for {want}");
                }
                assert!(c[i * c_rs + n..][..3].iter().all(|&v| v == -1.0), "{m}×{n}×{k}: row {i} past N is untouched");
            }
        }
    }
}
