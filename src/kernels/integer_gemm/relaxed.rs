//! The tiles of wasm's relaxed SIMD: `i32x4.relaxed_dot_i8x16_i7x16_add_s` multiplies 16
//! signed bytes by 16 bytes of the second operand and adds each four products into one of 4 i32
//! lanes, 16 multiply-adds an instruction where f32's relaxed multiply-add does 4. The standard
//! fixes the result only where the second operand's bytes are 0..=127; engines on CPUs with
//! VNNI (V8 on AVX-VNNI or AVX-512 VNNI) compute it as `vpdpbusd`, reading them as unsigned
//! bytes with exact 32-bit sums, while others add in saturating 16-bit pairs (`pmaddubsw`).
//! 7-bit activations, which every engine computes alike, took MiniLM q8 under its accuracy
//! target in Chromium (least cosine 0.99715 over 256 SST-2 sentences, target 0.998); so the
//! tiles take A in i8 codes offset to unsigned bytes (code + 128, as `quads` does natively) as
//! the second operand, W's codes as the signed first, in the quads' layout (`quad_strips`),
//! where a probe at first use finds the engine computes exactly that ([`available`]), and
//! elsewhere products of many rows stay f32 over decoded panels. The offset's share, 128 ·
//! Σ_block w, is packed with the strips as each block's starting sums. (Node.js 20's V8, behind
//! its flag, computes yet another sum: twice the products, the accumulator dropped.)
//!
//! A tile is 4 rows of A × a strip of 8 rows of W: 8 vectors of i32 sums, two of W and a
//! broadcast quad of A within x86's 16 vector registers (which V8 allocates from), and 8 of
//! f32 results, touched once a block.

use super::super::activation_codes::quantize_rows;
use super::quad_strips;
#[cfg(target_arch = "wasm32")]
use super::{is_whole, quad_strips::QUAD, BLOCK};
use super::{CodeRows, Kept, Layout, Strip, TileRows, TileSums, TileTarget};
use std::cell::Cell;
use std::thread::LocalKey;

/// Rows of W a strip (a tile's width) holds: two vectors of 4 lanes.
const STRIP: usize = 8;

/// Rows of A a tile holds.
const TILE_ROWS: usize = 4;

/// A's codes offset by this to unsigned bytes.
const OFFSET: i32 = 128;

/// Whether this engine computes the relaxed dot product of signed bytes by unsigned ones
/// exactly (checked once, on sums at the extremes of both operands, which saturate in 16-bit
/// pairs, and on mixed ones).
#[cfg(target_arch = "wasm32")]
pub(super) fn available() -> bool {
    static EXACT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *EXACT.get_or_init(wasm::dot_is_exact)
}

thread_local! {
    /// The calling thread's strips of W, kept between calls.
    static STRIPS: Cell<Kept<u8>> = const { Cell::new((Vec::new(), Vec::new())) };
    /// A task's band of A's rows quantized, kept between calls.
    static BAND: Cell<Kept<u8>> = const { Cell::new((Vec::new(), Vec::new())) };
}

/// The relaxed tiles' layout.
pub(super) struct Relaxed;

impl Layout for Relaxed {
    /// W's codes as the bits of signed bytes; A's as unsigned ones (code + 128).
    type Code = u8;
    const STRIP: usize = STRIP;
    const TILE_ROWS: usize = TILE_ROWS;
    /// 8 scales, then 8 offsets' sums.
    const BLOCK_VALUES: usize = 2 * STRIP;

    fn kept() -> [&'static LocalKey<Cell<Kept<u8>>>; 2] {
        [&STRIPS, &BAND]
    }

    fn pack_strip(w: &CodeRows<'_>, first: usize, codes: &mut [u8], values: &mut [f32]) {
        #[cfg(target_arch = "wasm32")]
        {
            let fits = codes.len() == w.blocks * BLOCK * STRIP
                && values.len() == w.blocks * 2 * STRIP
                && first + STRIP <= w.rows
                && w.codes.len() >= w.rows * w.blocks * BLOCK
                && w.scales.len() >= w.rows * w.blocks;
            if !w.nibbles && fits {
                // SAFETY: the strip's rows are all W's, and the lengths fit, checked just above.
                return unsafe { wasm::pack_strip_q8(w, first, codes, values) };
            }
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
        #[cfg(target_arch = "wasm32")]
        if is_whole::<Self>(&a, &w, &target) {
            // SAFETY: the rows and target are whole; the engine has relaxed SIMD (this build
            // requires it) and computes its dot product of unsigned bytes exactly (the route's
            // probe).
            return unsafe { wasm::tile_product(a, w, target) };
        }
        target.store(&Self::tile_portable(a, w));
    }

    fn tile_portable(a: TileRows<'_, u8>, w: Strip<'_, u8>) -> TileSums {
        quad_strips::tile_portable::<STRIP, TILE_ROWS>(a, w)
    }
}

#[cfg(target_arch = "wasm32")]
mod wasm {
    use super::{CodeRows, Strip, TileRows, TileTarget, BLOCK, OFFSET, QUAD, STRIP, TILE_ROWS};
    use std::arch::wasm32::*;
    use std::mem::transmute;

    /// Lanes of a vector: rows of W a vector of quads holds.
    const LANES: usize = 4;

    /// `$body` for each of a tile's rows, `$r` the row as a constant: rustc does not unroll
    /// loops at the browser build's opt-level "s", and arrays of vectors indexed in a loop stay
    /// in memory (MiniLM 32 × 128 in q8 took 2.37 s with the loops, against 1.82 in f32).
    macro_rules! each_row {
        ($r:ident => $body:block) => {{
            {
                const $r: usize = 0;
                $body
            }
            {
                const $r: usize = 1;
                $body
            }
            {
                const $r: usize = 2;
                $body
            }
            {
                const $r: usize = 3;
                $body
            }
        }};
    }
    const _: () = assert!(TILE_ROWS == 4, "each_row! unrolls four rows");

    /// Whether `i32x4.relaxed_dot_i8x16_i7x16_add_s` gives the exact sums of signed bytes by
    /// unsigned ones: the most negative and most positive products in every lane (whose pairs
    /// overflow 16 bits), and mixed ones, each added to an accumulator (the inputs opaque to the
    /// compiler, so that the engine computes them).
    pub(super) fn dot_is_exact() -> bool {
        let cases: [([i8; 16], [u8; 16]); 3] = [
            ([-128; 16], [255; 16]),
            ([127; 16], [255; 16]),
            (std::array::from_fn(|i| (i as i8).wrapping_mul(37).wrapping_sub(100)), std::array::from_fn(|i| (i * 89 % 256) as u8)),
        ];
        cases.iter().all(|&(x, y)| {
            let acc = [1000, -7, 123_456, i32::MIN / 2];
            let want: [i32; 4] = std::array::from_fn(|l| acc[l] + (0..4).map(|t| x[4 * l + t] as i32 * y[4 * l + t] as i32).sum::<i32>());
            // SAFETY: 16 bytes each way (v128 holds any bits).
            let [x, y, acc] =
                std::hint::black_box(unsafe { [transmute::<[i8; 16], v128>(x), transmute::<[u8; 16], v128>(y), transmute::<[i32; 4], v128>(acc)] });
            // SAFETY: as above.
            unsafe { transmute::<v128, [i32; 4]>(i32x4_relaxed_dot_i8x16_i7x16_add(x, y, acc)) == want }
        })
    }

    /// `Relaxed::pack_strip` of a strip of q8 codes all in W: per group of 4 rows and block,
    /// each half block's 16 codes of the 4 rows loaded and transposed in 32-bit lanes into 4
    /// vectors of quads (code 4q..4q + 4 of the 4 rows side by side), their sums counted on
    /// the way by the relaxed dot product with ones.
    ///
    /// # Safety
    /// Rows first..first + 8 are W's, whose codes and scales `w` holds; `codes` has the
    /// strip's blocks · 32 · 8 codes and `values` its blocks · 16.
    pub(super) unsafe fn pack_strip_q8(w: &CodeRows<'_>, first: usize, codes: &mut [u8], values: &mut [f32]) {
        let (blocks, row_bytes) = (w.blocks, w.blocks * BLOCK);
        let ones = u8x16_splat(1);
        for group in 0..STRIP / LANES {
            // SAFETY: each row is W's, each block 32 of its codes; the stores stay in `codes`
            // and `values` (their lengths, the caller's promise); no access needs alignment.
            unsafe {
                let rows: [*const u8; LANES] = std::array::from_fn(|j| w.codes.as_ptr().add((first + LANES * group + j) * row_bytes));
                for b in 0..blocks {
                    let mut sums = i32x4_splat(0);
                    for half in 0..2 {
                        let r: [v128; LANES] = std::array::from_fn(|j| v128_load(rows[j].add(b * BLOCK + 16 * half).cast()));
                        // Rows 0 and 1's quads 0 and 1, then 2 and 3; the same of rows 2 and 3.
                        let (low01, low23) = (i32x4_shuffle::<0, 4, 1, 5>(r[0], r[1]), i32x4_shuffle::<0, 4, 1, 5>(r[2], r[3]));
                        let (high01, high23) = (i32x4_shuffle::<2, 6, 3, 7>(r[0], r[1]), i32x4_shuffle::<2, 6, 3, 7>(r[2], r[3]));
                        let quads = [
                            i64x2_shuffle::<0, 2>(low01, low23),
                            i64x2_shuffle::<1, 3>(low01, low23),
                            i64x2_shuffle::<0, 2>(high01, high23),
                            i64x2_shuffle::<1, 3>(high01, high23),
                        ];
                        for (i, quad) in quads.into_iter().enumerate() {
                            let q = LANES * half + i;
                            v128_store(codes.as_mut_ptr().add((b * BLOCK + q * QUAD) * STRIP + QUAD * LANES * group).cast(), quad);
                            sums = i32x4_relaxed_dot_i8x16_i7x16_add(quad, ones, sums);
                        }
                    }
                    let out = values.as_mut_ptr().add(b * 2 * STRIP + LANES * group);
                    v128_store(out.add(STRIP).cast(), f32x4_convert_i32x4(i32x4_mul(sums, i32x4_splat(-OFFSET))));
                    for j in 0..LANES {
                        *out.add(j) = *w.scales.get_unchecked((first + LANES * group + j) * blocks + b);
                    }
                }
            }
        }
    }

    /// `Relaxed::tile`: per block, the sums start at the strip's offsets' sums; per quad of
    /// A's codes, broadcast, the relaxed dot product with the strip's two vectors of quads
    /// into the row's two vectors of sums; the sums converted and added by the blocks' scales
    /// (relaxed multiply-add) to the results; the bias added as they are stored.
    ///
    /// # Safety
    /// `a`, `w` and `target` are whole (`integer_gemm::is_whole`).
    pub(super) unsafe fn tile_product(a: TileRows<'_, u8>, w: Strip<'_, u8>, target: TileTarget<'_>) {
        let blocks = w.blocks;
        let mut acc = [[f32x4_splat(0.0); 2]; TILE_ROWS];
        for b in 0..blocks {
            // SAFETY: the strip has 16 values of block b and 32 · 8 codes, each row 32 codes
            // and a scale of it (the caller's promise); no load needs alignment.
            unsafe {
                let values = w.values.as_ptr().add(b * 2 * STRIP);
                let sw = [v128_load(values.cast()), v128_load(values.add(LANES).cast())];
                let offsets = [i32x4_trunc_sat_f32x4(v128_load(values.add(STRIP).cast())), i32x4_trunc_sat_f32x4(v128_load(values.add(STRIP + LANES).cast()))];
                let mut sums = [offsets; TILE_ROWS];
                for q in 0..BLOCK / QUAD {
                    let codes = w.codes.as_ptr().add((b * BLOCK + q * QUAD) * STRIP);
                    let quads = [v128_load(codes.cast()), v128_load(codes.add(16).cast())];
                    each_row!(R => {
                        let x = v128_load32_splat(a.codes.as_ptr().add((R * blocks + b) * BLOCK + q * QUAD).cast());
                        sums[R][0] = i32x4_relaxed_dot_i8x16_i7x16_add(quads[0], x, sums[R][0]);
                        sums[R][1] = i32x4_relaxed_dot_i8x16_i7x16_add(quads[1], x, sums[R][1]);
                    });
                }
                each_row!(R => {
                    let sa = f32x4_splat(*a.scales.get_unchecked(R * blocks + b));
                    acc[R][0] = f32x4_relaxed_madd(f32x4_convert_i32x4(sums[R][0]), f32x4_mul(sa, sw[0]), acc[R][0]);
                    acc[R][1] = f32x4_relaxed_madd(f32x4_convert_i32x4(sums[R][1]), f32x4_mul(sa, sw[1]), acc[R][1]);
                });
            }
        }
        // SAFETY: the bias has 8 floats, and C the target's width from each of its rows (whole).
        unsafe {
            let bias = [v128_load(target.bias.as_ptr().cast()), v128_load(target.bias.as_ptr().add(LANES).cast())];
            for (r, acc) in acc.iter().enumerate().take(target.rows) {
                let row = [f32x4_add(acc[0], bias[0]), f32x4_add(acc[1], bias[1])];
                let out = target.c.as_mut_ptr().add(r * target.c_rs);
                if target.width == STRIP {
                    v128_store(out.cast(), row[0]);
                    v128_store(out.add(LANES).cast(), row[1]);
                } else {
                    let lanes = transmute::<[v128; 2], [f32; STRIP]>(row);
                    std::ptr::copy_nonoverlapping(lanes.as_ptr(), out, target.width);
                }
            }
        }
    }
}
