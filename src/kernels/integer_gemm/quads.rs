//! The tiles of CPUs with AVX-512 VNNI: `vpdpbusd` multiplies 64 unsigned bytes by 64 signed
//! ones and adds each four products into one of 16 i32 lanes, 4× the multiply-adds of an f32
//! FMA of the same width. A is quantized to i8 codes (as `int8` quantizes few rows) and offset
//! to unsigned bytes (code + 128); W's codes stay signed bytes, four consecutive codes of a row
//! to a lane, in strips of 32 rows (`quad_strips` gives the layout). The offset's share, 128 ·
//! Σ_block w, is packed with the strips and taken as each block's starting sums, so the block
//! sums are the exact Σ a · w (32 products of codes within ±127, and 255 · 127 · 32 before the
//! offset: under 2^20).
//!
//! A tile is 6 rows of A × the strip's 32 rows: 12 vectors of i32 sums and 12 of f32 results,
//! with two of W and a broadcast quad of A, of AVX-512's 32 registers, and 12 independent
//! chains of `vpdpbusd` to cover its latency.

use super::super::activation_codes::quantize_rows;
use super::quad_strips::{self, QUAD};
use super::{is_whole, CodeRows, Kept, Layout, Strip, TileRows, TileSums, TileTarget, BLOCK};
use std::cell::Cell;
use std::thread::LocalKey;

/// Rows of W a strip (a tile's width) holds: two vectors of 16 lanes.
const STRIP: usize = 32;

/// Rows of A a tile holds.
const TILE_ROWS: usize = 6;

/// A's codes offset by this to unsigned bytes.
const OFFSET: i32 = 128;

/// Whether the CPU has these tiles' fast path at 512 bits (AVX-512 VNNI).
fn has_512() -> bool {
    std::arch::is_x86_feature_detected!("avx512f") && std::arch::is_x86_feature_detected!("avx512vnni")
}

/// Whether the CPU has these tiles' fast path at 256 bits (AVX-VNNI: Intel's cores from Alder
/// Lake, many without AVX-512).
fn has_256() -> bool {
    std::arch::is_x86_feature_detected!("avxvnni") && std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
}

/// Whether the CPU has a fast path of these tiles.
pub(super) fn available() -> bool {
    has_512() || has_256()
}

thread_local! {
    /// The calling thread's strips of W, kept between calls.
    static STRIPS: Cell<Kept<u8>> = const { Cell::new((Vec::new(), Vec::new())) };
    /// A task's band of A's rows quantized, kept between calls.
    static BAND: Cell<Kept<u8>> = const { Cell::new((Vec::new(), Vec::new())) };
}

/// The quads' layout.
pub(super) struct Quads;

impl Layout for Quads {
    /// W's codes as the bits of signed bytes; A's as unsigned ones (code + 128).
    type Code = u8;
    const STRIP: usize = STRIP;
    const TILE_ROWS: usize = TILE_ROWS;
    /// 32 scales, then 32 offsets' sums.
    const BLOCK_VALUES: usize = 2 * STRIP;

    fn kept() -> [&'static LocalKey<Cell<Kept<u8>>>; 2] {
        [&STRIPS, &BAND]
    }

    fn pack_strip(w: &CodeRows<'_>, first: usize, codes: &mut [u8], values: &mut [f32]) {
        let fits = codes.len() == w.blocks * BLOCK * STRIP
            && values.len() == w.blocks * 2 * STRIP
            && first < w.rows
            && w.codes.len() >= w.rows * w.blocks * BLOCK
            && w.scales.len() >= w.rows * w.blocks
            && i32::try_from(w.blocks * BLOCK * STRIP).is_ok();
        if !w.nibbles && fits && has_512() {
            // SAFETY: the CPU has AVX-512 F and VNNI, checked just above, as are the lengths (and
            // that a strip's offsets in W fit the gathers' i32s).
            return unsafe { x86::pack_strip_q8(w, first, codes, values) };
        }
        quad_strips::pack_strip_portable::<STRIP>(w, first, OFFSET, codes, values);
    }

    fn quantize_band(a: &[f32], a_rs: usize, k: usize, codes: &mut [u8], scales: &mut [f32]) {
        quantize_rows::<i8>(a, a_rs, k, bytemuck::cast_slice_mut(codes), scales);
        // −127..=127 + 128 in unsigned bytes: flipping the sign bit of the two's complement.
        for code in codes {
            *code ^= 0x80;
        }
    }

    fn tile(a: TileRows<'_, u8>, w: Strip<'_, u8>, target: TileTarget<'_>) {
        // No construction here makes rows or targets of other lengths, but the fast path's
        // loads and stores rely on it, so it is never handed any.
        if is_whole::<Self>(&a, &w, &target) {
            if has_512() {
                // SAFETY: the CPU has AVX-512 F and VNNI, checked just above, and the rows and
                // target are whole.
                return unsafe { x86::tile_product(a, w, target) };
            }
            if has_256() {
                // SAFETY: the CPU has AVX-VNNI, AVX2 and FMA, checked just above, and the rows
                // and target are whole.
                return unsafe { x86::tile_product_256(a, w, target) };
            }
        }
        target.store(&Self::tile_portable(a, w));
    }

    fn tile_portable(a: TileRows<'_, u8>, w: Strip<'_, u8>) -> TileSums {
        quad_strips::tile_portable::<STRIP, TILE_ROWS>(a, w)
    }
}

mod x86 {
    use super::{CodeRows, Strip, TileRows, TileTarget, BLOCK, OFFSET, QUAD, STRIP, TILE_ROWS};
    use std::arch::x86_64::*;

    /// `Quads::pack_strip` of q8 codes with AVX-512: per block and quad, the strip's 32 rows'
    /// four codes gathered 16 rows at a time (rows past W masked off, zeros) and stored side by
    /// side; their sums of the block counted on the way (`vpdpbusd` with ones) and the rows'
    /// scales gathered. Measured on 2 threads of an Intel Xeon (`bench kernels --only
    /// matmul_q8`, 2026-12-01, two runs alternating), 32 × 768 × 3072 took 1.0–1.1 ms with the
    /// plain loops packing and 0.61–0.72 with this; MiniLM 1 × 128 in q8 15.7–17.7 and 10.9–13.9.
    ///
    /// # Safety
    /// The CPU has AVX-512 F and VNNI; `w` holds its rows' codes and scales, `first` is one of
    /// its rows, `codes` has the strip's blocks · 32 · 32 codes and `values` its blocks · 64;
    /// 32 rows of codes, W's row stride apart, span fewer than 2^31 bytes.
    #[target_feature(enable = "avx512f,avx512vnni")]
    pub(super) unsafe fn pack_strip_q8(w: &CodeRows<'_>, first: usize, codes: &mut [u8], values: &mut [f32]) {
        let (blocks, row_bytes) = (w.blocks, w.blocks * BLOCK);
        let rows = (w.rows - first).min(STRIP);
        let lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        // Each half's rows, as offsets from the strip's first (in bytes of codes and in scales),
        // and which of them are W's.
        let halves = [0, 16].map(|half| _mm512_add_epi32(lanes, _mm512_set1_epi32(half)));
        let code_offsets = halves.map(|half| _mm512_mullo_epi32(half, _mm512_set1_epi32(row_bytes as i32)));
        let scale_offsets = halves.map(|half| _mm512_mullo_epi32(half, _mm512_set1_epi32(blocks as i32)));
        let masks = [0, 16].map(|half| ((1u32 << rows.saturating_sub(half).min(16)) - 1) as __mmask16);
        let ones = _mm512_set1_epi8(1);
        // SAFETY: each gathered lane of the masks is a row of W, the codes and scales of
        // whose blocks it reads; the stores stay in `codes` and `values` (their lengths, the
        // caller's promise); no load or store needs alignment.
        unsafe {
            let (w_codes, w_scales) = (w.codes.as_ptr().add(first * row_bytes), w.scales.as_ptr().add(first * blocks));
            for b in 0..blocks {
                let mut sums = [_mm512_setzero_si512(); 2];
                for q in 0..BLOCK / QUAD {
                    let quads = w_codes.add(b * BLOCK + q * QUAD).cast::<i32>();
                    let out = codes.as_mut_ptr().add((b * BLOCK + q * QUAD) * STRIP);
                    for h in 0..2 {
                        let quad = _mm512_mask_i32gather_epi32::<1>(_mm512_setzero_si512(), masks[h], code_offsets[h], quads);
                        _mm512_storeu_si512(out.add(64 * h).cast(), quad);
                        sums[h] = _mm512_dpbusd_epi32(sums[h], ones, quad);
                    }
                }
                let out = values.as_mut_ptr().add(b * 2 * STRIP);
                for h in 0..2 {
                    let scales = _mm512_mask_i32gather_ps::<4>(_mm512_setzero_ps(), masks[h], scale_offsets[h], w_scales.add(b));
                    _mm512_storeu_ps(out.add(16 * h), scales);
                    let offsets = _mm512_mullo_epi32(sums[h], _mm512_set1_epi32(-OFFSET));
                    _mm512_storeu_ps(out.add(STRIP + 16 * h), _mm512_cvtepi32_ps(offsets));
                }
            }
        }
    }

    /// `Quads::tile` with AVX-512: per block, the sums start at the strip's offsets' sums; per
    /// quad of A's codes, broadcast, `vpdpbusd` with the strip's two vectors of quads into the
    /// row's two vectors of sums; the sums converted and added by the blocks' scales (FMA) to
    /// the results; the bias added as they are stored, masked to the strip's width.
    ///
    /// # Safety
    /// The CPU has AVX-512 F and VNNI; `a`, `w` and `target` are whole
    /// (`integer_gemm::is_whole`).
    #[target_feature(enable = "avx512f,avx512vnni")]
    pub(super) unsafe fn tile_product(a: TileRows<'_, u8>, w: Strip<'_, u8>, target: TileTarget<'_>) {
        let blocks = w.blocks;
        let rows: [*const u8; TILE_ROWS] = std::array::from_fn(|r| a.codes[r * blocks * BLOCK..].as_ptr());
        let mut acc = [[_mm512_setzero_ps(); 2]; TILE_ROWS];
        for b in 0..blocks {
            // SAFETY: the strip has 64 values of block b and 32 · 32 codes, each row 32 codes
            // and a scale of it (the caller's promise); the loads have no alignment requirement.
            unsafe {
                let values = w.values.as_ptr().add(b * 2 * STRIP);
                let sw = [_mm512_loadu_ps(values), _mm512_loadu_ps(values.add(16))];
                let offsets = [_mm512_cvtps_epi32(_mm512_loadu_ps(values.add(32))), _mm512_cvtps_epi32(_mm512_loadu_ps(values.add(48)))];
                let mut sums = [offsets; TILE_ROWS];
                for q in 0..BLOCK / QUAD {
                    let codes = w.codes.as_ptr().add((b * BLOCK + q * QUAD) * STRIP);
                    let quads = [_mm512_loadu_si512(codes.cast()), _mm512_loadu_si512(codes.add(64).cast())];
                    for (sums, row) in sums.iter_mut().zip(rows) {
                        let x = _mm512_set1_epi32(row.add(b * BLOCK + q * QUAD).cast::<i32>().read_unaligned());
                        sums[0] = _mm512_dpbusd_epi32(sums[0], x, quads[0]);
                        sums[1] = _mm512_dpbusd_epi32(sums[1], x, quads[1]);
                    }
                }
                for (r, (acc, sums)) in acc.iter_mut().zip(sums).enumerate() {
                    let sa = _mm512_set1_ps(*a.scales.get_unchecked(r * blocks + b));
                    for h in 0..2 {
                        acc[h] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums[h]), _mm512_mul_ps(sa, sw[h]), acc[h]);
                    }
                }
            }
        }
        // Lanes of each half within the strip's width.
        let masks = [0, 16].map(|first| ((1u32 << target.width.saturating_sub(first).min(16)) - 1) as __mmask16);
        // SAFETY: the bias has 32 floats, and C the target's width from each of its rows (whole).
        unsafe {
            let bias = [_mm512_loadu_ps(target.bias.as_ptr()), _mm512_loadu_ps(target.bias.as_ptr().add(16))];
            for (r, acc) in acc.iter().enumerate().take(target.rows) {
                let out = target.c.as_mut_ptr().add(r * target.c_rs);
                _mm512_mask_storeu_ps(out, masks[0], _mm512_add_ps(acc[0], bias[0]));
                _mm512_mask_storeu_ps(out.add(16), masks[1], _mm512_add_ps(acc[1], bias[1]));
            }
        }
    }
    /// `Quads::tile` at 256 bits (AVX-VNNI): the tile in four parts of 3 rows × 16 columns (6
    /// vectors of sums and 6 of results, with two of W and a broadcast of A, of AVX2's 16
    /// registers), each as the 512-bit kernel computes the whole tile; the stores masked to the
    /// strip's width.
    ///
    /// # Safety
    /// The CPU has AVX-VNNI, AVX2 and FMA; `a`, `w` and `target` are whole
    /// (`integer_gemm::is_whole`).
    #[target_feature(enable = "avxvnni,avx2,fma")]
    pub(super) unsafe fn tile_product_256(a: TileRows<'_, u8>, w: Strip<'_, u8>, target: TileTarget<'_>) {
        const PART_ROWS: usize = TILE_ROWS / 2;
        const PART_COLUMNS: usize = STRIP / 2;
        let blocks = w.blocks;
        for (first_row, first_column) in [(0, 0), (0, PART_COLUMNS), (PART_ROWS, 0), (PART_ROWS, PART_COLUMNS)] {
            let rows: [*const u8; PART_ROWS] = std::array::from_fn(|r| a.codes[(first_row + r) * blocks * BLOCK..].as_ptr());
            let mut acc = [[_mm256_setzero_ps(); 2]; PART_ROWS];
            for b in 0..blocks {
                // SAFETY: as in `tile_product`: the strip has 64 values of block b and 32 · 32
                // codes, each row 32 codes and a scale of it (the caller's promise).
                unsafe {
                    let values = w.values.as_ptr().add(b * 2 * STRIP + first_column);
                    let sw = [_mm256_loadu_ps(values), _mm256_loadu_ps(values.add(8))];
                    let offsets = [_mm256_cvtps_epi32(_mm256_loadu_ps(values.add(STRIP))), _mm256_cvtps_epi32(_mm256_loadu_ps(values.add(STRIP + 8)))];
                    let mut sums = [offsets; PART_ROWS];
                    for q in 0..BLOCK / QUAD {
                        let codes = w.codes.as_ptr().add((b * BLOCK + q * QUAD) * STRIP + QUAD * first_column);
                        let quads = [_mm256_loadu_si256(codes.cast()), _mm256_loadu_si256(codes.add(32).cast())];
                        for (sums, row) in sums.iter_mut().zip(rows) {
                            let x = _mm256_set1_epi32(row.add(b * BLOCK + q * QUAD).cast::<i32>().read_unaligned());
                            sums[0] = _mm256_dpbusd_avx_epi32(sums[0], x, quads[0]);
                            sums[1] = _mm256_dpbusd_avx_epi32(sums[1], x, quads[1]);
                        }
                    }
                    for (r, (acc, sums)) in acc.iter_mut().zip(sums).enumerate() {
                        let sa = _mm256_set1_ps(*a.scales.get_unchecked((first_row + r) * blocks + b));
                        for h in 0..2 {
                            acc[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums[h]), _mm256_mul_ps(sa, sw[h]), acc[h]);
                        }
                    }
                }
            }
            // Lanes of each vector within the strip's width: lane i stored where i < width.
            let masks = [0, 8].map(|first| {
                let first = (first_column + first) as i32;
                _mm256_cmpgt_epi32(_mm256_set1_epi32(target.width as i32 - first), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7))
            });
            // SAFETY: the bias has 32 floats, and C the target's width from each of its rows
            // (whole); masked stores write no lane past the width.
            unsafe {
                let bias = [_mm256_loadu_ps(target.bias.as_ptr().add(first_column)), _mm256_loadu_ps(target.bias.as_ptr().add(first_column + 8))];
                for (r, acc) in acc.iter().enumerate().take(target.rows.saturating_sub(first_row)) {
                    let out = target.c.as_mut_ptr().add((first_row + r) * target.c_rs + first_column);
                    _mm256_maskstore_ps(out, masks[0], _mm256_add_ps(acc[0], bias[0]));
                    _mm256_maskstore_ps(out.add(8), masks[1], _mm256_add_ps(acc[1], bias[1]));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::activation_codes::QuantizedRows;
    use super::super::tests::{buffers, code_rows, fastest_sums, reference};
    use super::super::{Strips, MAX_STRIP, MAX_TILE_ROWS};
    use super::*;
    use rand::{rngs::StdRng, Rng, SeedableRng};

    /// A tile's sums on every path this CPU has: plain loops, and the 512- and 256-bit kernels
    /// storing `rows` × `width` of them (checked to leave every other value alone).
    fn every_path(a: TileRows<'_, u8>, w: Strip<'_, u8>, (rows, width): (usize, usize)) -> Vec<(&'static str, TileSums)> {
        let mut paths = vec![("plain loops", Quads::tile_portable(a, w))];
        let kernel_sums = |kernel: unsafe fn(TileRows<'_, u8>, Strip<'_, u8>, TileTarget<'_>)| {
            let mut sums = [[f32::NAN; MAX_STRIP]; MAX_TILE_ROWS];
            let target = TileTarget { c: sums.as_flattened_mut(), c_rs: MAX_STRIP, rows, width, bias: &[0.0; STRIP] };
            // SAFETY: the CPU has the kernel's features (checked by the caller), the tile fits
            // the strip and the target is whole.
            unsafe { kernel(a, w, target) };
            for (r, j) in (0..MAX_TILE_ROWS).flat_map(|r| (0..MAX_STRIP).map(move |j| (r, j))).filter(|&(r, j)| r >= rows || j >= width) {
                assert!(sums[r][j].is_nan(), "[{r}, {j}] is outside the {rows} × {width} stored");
            }
            sums
        };
        if has_512() {
            paths.push(("AVX-512 VNNI", kernel_sums(x86::tile_product)));
        }
        if has_256() {
            paths.push(("AVX-VNNI", kernel_sums(x86::tile_product_256)));
        }
        paths
    }

    /// A tile's rows of A as this layout holds them (offset bytes), from i8 codes.
    fn offset(codes: &[i8]) -> Vec<u8> {
        codes.iter().map(|&c| (c as i32 + OFFSET) as u8).collect()
    }

    /// Every path's tiles against the reference: with codes within ±127 and scales 1 or 2,
    /// every sum is an integer under 2^24 (8 blocks · 32 · 127² · 4), exact in f32 in any
    /// order, so bit for bit.
    #[test]
    fn every_path_multiplies_tiles_as_the_reference() {
        let mut rng = StdRng::seed_from_u64(6);
        for ((blocks, rows), nibbles) in [(1, 32), (3, 5), (8, 45), (2, 70)].into_iter().flat_map(|shape| [(shape, false), (shape, true)]) {
            let (w_codes, w_scales) = code_rows(&mut rng, rows, blocks, nibbles);
            let w = CodeRows { codes: &w_codes, scales: &w_scales, rows, blocks, nibbles };
            let a = QuantizedRows {
                codes: (0..TILE_ROWS * blocks * BLOCK).map(|_| rng.random_range(-127..=127i8)).collect(),
                scales: (0..TILE_ROWS * blocks).map(|_| if rng.random_bool(0.5) { 1.0 } else { 2.0 }).collect(),
                blocks,
            };
            let mut buffers = buffers::<Quads>(&w, 77);
            let strips = Strips::pack::<Quads>(None, w, &mut buffers.0, &mut buffers.1).unwrap();
            let codes = offset(&a.codes);
            let tile = TileRows { codes: &codes, scales: &a.scales, blocks };
            for s in 0..strips.count {
                let strip = strips.strip::<Quads>(s);
                // Every other strip stores fewer rows than a tile's (the last of a band).
                let stored = (TILE_ROWS - s % 2 * 2, STRIP.min(rows - s * STRIP));
                let mut paths = every_path(tile, strip, stored);
                paths.push(("the CPU's fastest path", fastest_sums::<Quads>(tile, strip)));
                for (path, sums) in paths {
                    for (r, j) in (0..stored.0).flat_map(|r| (0..stored.1).map(move |j| (r, j))) {
                        let (got, want) = (sums[r][j], reference(&a, r, &w, s * STRIP + j));
                        assert_eq!(got as f64, want, "{path}, nibbles {nibbles}, {blocks} blocks, strip {s}, [{r}, {j}]");
                    }
                }
            }
        }
    }

    /// Both packings (the AVX-512 one where the CPU has it) of a strip whose last two rows are
    /// past W's, and which starts at a row past W's first.
    #[test]
    fn a_strip_holds_quads_and_offsets() {
        let mut rng = StdRng::seed_from_u64(9);
        let (rows, blocks, first) = (2 * STRIP - 2, 3, STRIP);
        let bytes: Vec<u8> = (0..rows * blocks * BLOCK).map(|_| rng.random_range(-127..=127i8) as u8).collect();
        let scales: Vec<f32> = (0..rows * blocks).map(|i| i as f32).collect();
        let w = CodeRows { codes: &bytes, scales: &scales, rows, blocks, nibbles: false };
        type Packing = fn(&CodeRows<'_>, usize, &mut [u8], &mut [f32]);
        let portable: Packing = |w, first, codes, values| quad_strips::pack_strip_portable::<STRIP>(w, first, OFFSET, codes, values);
        let packings: [(&str, Packing); 2] = [("the CPU's packing", Quads::pack_strip), ("plain loops", portable)];
        for (packing, pack) in packings {
            let (mut codes, mut values) = (vec![77u8; blocks * BLOCK * STRIP], vec![f32::NAN; blocks * 2 * STRIP]);
            pack(&w, first, &mut codes, &mut values);
            for (b, j) in (0..blocks).flat_map(|b| (0..STRIP).map(move |j| (b, j))) {
                let n = first + j;
                let row: Vec<i8> = (0..BLOCK).map(|i| if n < rows { bytes[(n * blocks + b) * BLOCK + i] as i8 } else { 0 }).collect();
                for (q, t) in (0..BLOCK / QUAD).flat_map(|q| (0..QUAD).map(move |t| (q, t))) {
                    let code = codes[b * BLOCK * STRIP + q * QUAD * STRIP + QUAD * j + t] as i8;
                    assert_eq!(code, row[QUAD * q + t], "{packing}: block {b}, row {n}, quad {q}, code {t}");
                }
                let scale = if n < rows { (n * blocks + b) as f32 } else { 0.0 };
                assert_eq!(values[b * 2 * STRIP + j], scale, "{packing}: block {b}, row {n}'s scale");
                let offsets = -128.0 * row.iter().map(|&c| c as f32).sum::<f32>();
                assert_eq!(values[b * 2 * STRIP + STRIP + j], offsets, "{packing}: block {b}, row {n}'s offsets' sum");
            }
        }
    }

    #[test]
    fn extreme_codes_do_not_overflow() {
        // ±127 · ±127 in every product of a block (255 · 127 · 32 before the offset), and q4's
        // extremes, −8 and 7 (nibbles 0 and 15).
        for (x, y) in [(127i8, 127i8), (-127, 127), (127, -127), (-127, -127)] {
            for (bytes, nibbles, y) in
                [(vec![y as u8; STRIP * BLOCK], false, y as i32), (vec![0; STRIP * BLOCK / 2], true, -8), (vec![0xFF; STRIP * BLOCK / 2], true, 7)]
            {
                let w = CodeRows { codes: &bytes, scales: &[1.0; STRIP], rows: STRIP, blocks: 1, nibbles };
                let (a_codes, a_scales) = (offset(&[x; TILE_ROWS * BLOCK]), [1.0; TILE_ROWS]);
                let tile = TileRows { codes: &a_codes, scales: &a_scales, blocks: 1 };
                let want = (32 * x as i32 * y) as f32;
                let mut buffers = buffers::<Quads>(&w, 77);
                let strips = Strips::pack::<Quads>(None, w, &mut buffers.0, &mut buffers.1).unwrap();
                for (path, sums) in every_path(tile, strips.strip::<Quads>(0), (TILE_ROWS, STRIP)) {
                    assert!(sums[..TILE_ROWS].iter().all(|row| row[..STRIP] == [want; STRIP]), "{path}: {x} · {y} (nibbles {nibbles})");
                }
            }
        }
    }
}
