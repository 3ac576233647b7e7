//! The integer product of many rows of A (from [`Route::min_rows`]: sentences and batches,
//! where multiply-adds, not reading W, are what the product costs), natively on x86-64 and in
//! wasm builds with relaxed SIMD: W's q8 or q4 codes packed once a call into strips of rows
//! (gathered with AVX-512 where the CPU has it), A quantized in the blocks of 32 the weights
//! use a band of rows at a time, and tiles of A's rows × a strip multiplied in integers. The
//! block sums are exact int32s, each scaled once by the two blocks' scales:
//!
//! C[m, n] = Σ_b sa[m, b] · sw[n, b] · Σ_{j < 32} qa[m, 32b + j] · qw[n, 32b + j]
//!
//! Three layouts ([`Layout`]), the CPU (or the engine) choosing ([`Route`]):
//! - [`quads`]: AVX-512 VNNI's `vpdpbusd` (64 multiply-adds of bytes an instruction), A in i8
//!   codes offset to unsigned bytes, W's codes four at a time;
//! - [`pairs`]: AVX2's `vpmaddwd` on pairs of i16 (A in i16 codes, W widened), where the CPU
//!   has AVX2 but not AVX-512 (with AVX-512 and no VNNI, gemm's 512-bit f32 wins);
//! - [`relaxed`]: wasm's `i32x4.relaxed_dot_i8x16_i7x16_add_s` (16 multiply-adds of bytes an
//!   instruction), the quads' layout and codes, where the engine computes it on unsigned bytes
//!   exactly (as `vpdpbusd`: V8 on CPUs with VNNI).
//!
//! Plain wasm SIMD has no such product: the same tiles on `i32x4.dot_i16x8_s` (half a strip at
//! a time) ran MiniLM 32 × 128 in Chromium 3× slower than f32 (8.4 s against 2.8, the wasm
//! build at opt-level "s"; BENCHMARKS.md).

#[cfg(target_arch = "x86_64")]
mod pairs;
mod quad_strips;
#[cfg(target_arch = "x86_64")]
mod quads;
#[cfg(any(test, target_arch = "wasm32"))]
mod relaxed;

use super::int8::{block_codes, CodeRows, Target};
use super::{each_chunk, each_chunk_pair, pieces, scratch, Threads};
use crate::error::Result;
use crate::quantize::{ActivationCodes, BLOCK};
use std::cell::Cell;
use std::thread::LocalKey;

/// The most rows of A a task takes: 64 rows of codes (24–192 KB for K of 384–1536) stay in
/// the L2 cache while every strip of W passes them.
const BAND_ROWS: usize = 64;

/// The fewest rows of A the pairs take: every product past `int8::MAX_ROWS`. W is widened
/// into strips at every call, which costs what the product of about 30 rows does: measured
/// natively on 2 threads (`bench kernels --only matmul_q8`, 2026-11-30), 31 × 768 × 3072 took
/// 1.5–2.0 ms through the pairs and 1.9–2.0 through `int8`'s rows, 128 × 768 × 3072 3.5–4.2
/// through the pairs and 8.7 in f32 over decoded panels.
#[cfg(target_arch = "x86_64")]
const PAIRS_MIN_ROWS: usize = super::int8::MAX_ROWS + 1;

/// The fewest rows of A the quads take. Measured on 2 threads of an Intel Xeon with AVX-512
/// VNNI (`bench kernels --only matmul_q8`, 2026-12-01, two runs each, W packed with AVX-512
/// gathers): × 768 × 3072 took 0.43–0.58 ms for 8 rows through `int8`'s rows (about 0.07 a
/// row) and 0.53–0.60 through the quads, 31 rows 0.62–0.84 through the quads (and 2.35–3.23
/// through the rows, measured the day before: that path did not change): even at about 9 rows.
#[cfg(target_arch = "x86_64")]
const QUADS_MIN_ROWS: usize = 12;

/// The fewest rows of A the relaxed tiles take: as the quads natively (W is packed at each
/// call in both); not measured apart in the browser.
#[cfg(target_arch = "wasm32")]
const RELAXED_MIN_ROWS: usize = 12;

/// Which tiles this CPU multiplies long products with, if any beats f32 over decoded panels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Route {
    /// AVX-512 VNNI: A in i8 codes (`quads`).
    #[cfg(target_arch = "x86_64")]
    Quads,
    /// AVX2 and FMA without AVX-512: A in i16 codes (`pairs`).
    #[cfg(target_arch = "x86_64")]
    Pairs,
    /// wasm's relaxed dot product of bytes, where the engine computes it on unsigned bytes
    /// exactly: A in i8 codes (`relaxed`).
    #[cfg(target_arch = "wasm32")]
    Relaxed,
}

impl Route {
    /// The fastest tiles of this CPU; None where gemm's f32 over decoded panels is faster:
    /// without AVX2, or with AVX-512 but no VNNI (gemm's 512-bit f32 runs at twice the pairs'
    /// width: 4096 × 384 × 1536 took 51 ms through the pairs and 20 in f32 on 2 threads of an
    /// Intel Xeon, `bench kernels --only matmul`, 2026-11-30); in wasm, where the engine's
    /// relaxed dot product is not exact on unsigned bytes.
    pub fn of_this_cpu() -> Option<Route> {
        #[cfg(target_arch = "x86_64")]
        if quads::available() {
            return Some(Route::Quads);
        } else if pairs::available() && !std::arch::is_x86_feature_detected!("avx512f") {
            return Some(Route::Pairs);
        }
        #[cfg(target_arch = "wasm32")]
        if relaxed::available() {
            return Some(Route::Relaxed);
        }
        None
    }

    /// The fewest rows of A this route takes (fewer go to `int8`'s rows).
    pub fn min_rows(self) -> usize {
        match self {
            #[cfg(target_arch = "x86_64")]
            Route::Quads => QUADS_MIN_ROWS,
            #[cfg(target_arch = "x86_64")]
            Route::Pairs => PAIRS_MIN_ROWS,
            #[cfg(target_arch = "wasm32")]
            Route::Relaxed => RELAXED_MIN_ROWS,
        }
    }

    /// The codes A is quantized to on this route.
    pub fn activation_codes(self) -> ActivationCodes {
        match self {
            #[cfg(target_arch = "x86_64")]
            Route::Quads => ActivationCodes::I8,
            #[cfg(target_arch = "x86_64")]
            Route::Pairs => ActivationCodes::I16,
            #[cfg(target_arch = "wasm32")]
            Route::Relaxed => ActivationCodes::I8,
        }
    }
}

/// C = A · Wᵀ (+ bias) for rows 0..m of `a` (stride `a_rs`, K values each) through `route`'s
/// tiles.
pub(super) fn product(route: Route, threads: Option<Threads<'_>>, a: (&[f32], usize, usize), w: CodeRows<'_>, m: usize, target: Target<'_>) -> Result<()> {
    match route {
        #[cfg(target_arch = "x86_64")]
        Route::Quads => product_of::<quads::Quads>(threads, a, w, m, target),
        #[cfg(target_arch = "x86_64")]
        Route::Pairs => product_of::<pairs::Pairs>(threads, a, w, m, target),
        #[cfg(target_arch = "wasm32")]
        Route::Relaxed => product_of::<relaxed::Relaxed>(threads, a, w, m, target),
    }
}

/// How a route's strips and bands hold codes, and its tile kernel.
trait Layout {
    /// A code as strips and bands hold it.
    type Code: Copy + Default + Send + Sync + 'static;
    /// Rows of W a strip holds (a tile's width): at most [`MAX_STRIP`].
    const STRIP: usize;
    /// Rows of A a tile holds: at most [`MAX_TILE_ROWS`].
    const TILE_ROWS: usize;
    /// f32 values a strip keeps for each block beside its codes (its rows' scales first).
    const BLOCK_VALUES: usize;

    /// The buffers this thread keeps for W's strips and for a band of A (see [`with_kept`]).
    fn kept() -> [&'static LocalKey<Cell<Kept<Self::Code>>>; 2];

    /// The strip of W's rows first.. (zeros past N) into `codes` (blocks · 32 · STRIP) and
    /// `values` (blocks · BLOCK_VALUES), every value written.
    fn pack_strip(w: &CodeRows<'_>, first: usize, codes: &mut [Self::Code], values: &mut [f32]);

    /// Quantizes as many rows of `a` (stride `a_rs`, K values each) as `scales` has rows of
    /// blocks into `codes` and `scales`, writing every value.
    fn quantize_band(a: &[f32], a_rs: usize, k: usize, codes: &mut [Self::Code], scales: &mut [f32]);

    /// One tile into C: its sums plus the bias stored where `target` says, on the fastest path
    /// this CPU has.
    fn tile(a: TileRows<'_, Self::Code>, w: Strip<'_, Self::Code>, target: TileTarget<'_>);

    /// `tile`'s sums in plain loops (the reference the others match): every block's exact sum,
    /// scaled and added in order; rows of [`MAX_STRIP`] values, the first STRIP used.
    fn tile_portable(a: TileRows<'_, Self::Code>, w: Strip<'_, Self::Code>) -> TileSums;
}

/// The widest strip of any layout.
const MAX_STRIP: usize = 32;
/// The tallest tile of any layout.
const MAX_TILE_ROWS: usize = 8;

/// A tile's results: rows of A × the strip's rows of W.
type TileSums = [[f32; MAX_STRIP]; MAX_TILE_ROWS];

/// Codes and their blocks' values (scales…): a buffer pair [`with_kept`] keeps.
type Kept<C> = (Vec<C>, Vec<f32>);

/// Bytes of a (codes, values) pair [`with_kept`] keeps for the next call, each pair apart: the
/// widest layer of BERT-large's widened (4096 × 1024 i16: 8 MiB), not an LM head's (GPT-2's
/// 50257 × 768: 74 MiB).
const KEPT_BYTES: usize = 16 << 20;

/// Runs `work` on `lens` codes and values of buffers this thread keeps between calls in
/// `kept` (up to [`KEPT_BYTES`]), so that a product called at every layer does not fault in and
/// zero fresh pages each time (1 ms a call for MiniLM's widest weights, measured with fresh
/// buffers). The values are what the last call left: `work` writes each before it reads it.
fn with_kept<C: Copy + Default, R>(
    kept: &'static LocalKey<Cell<Kept<C>>>,
    (codes_len, values_len): (usize, usize),
    work: impl FnOnce(&mut [C], &mut [f32]) -> Result<R>,
) -> Result<R> {
    // A kept buffer too short for this call is freed before its replacement is made.
    fn at_least<T: Copy + Default>(kept: Vec<T>, len: usize) -> Result<Vec<T>> {
        if kept.len() >= len {
            return Ok(kept);
        }
        drop(kept);
        scratch(len)
    }
    let (codes, values) = kept.take();
    let (mut codes, mut values) = (at_least(codes, codes_len)?, at_least(values, values_len)?);
    let result = work(&mut codes[..codes_len], &mut values[..values_len]);
    if size_of_val(codes.as_slice()) + size_of_val(values.as_slice()) <= KEPT_BYTES {
        kept.set((codes, values));
    }
    result
}

/// W packed into strips of `L::STRIP` rows: for strip s and block b, `codes[s]`'s 32 · STRIP
/// codes of the block in the layout's order and `values[s][BLOCK_VALUES · b..]` its values;
/// rows past N (`rows`) are zeros.
struct Strips<'a, C> {
    codes: &'a [C],
    values: &'a [f32],
    rows: usize,
    blocks: usize,
    count: usize,
}

/// One strip of [`Strips`]: `blocks` blocks of codes and values.
#[derive(Clone, Copy)]
struct Strip<'a, C> {
    codes: &'a [C],
    values: &'a [f32],
    blocks: usize,
}

impl<'a, C: Copy + Send> Strips<'a, C> {
    /// Values of `codes` and `values` that W's strips take.
    fn lens<L: Layout<Code = C>>(w: &CodeRows<'_>) -> (usize, usize) {
        let count = w.rows.div_ceil(L::STRIP);
        (count * w.blocks * BLOCK * L::STRIP, count * w.blocks * L::BLOCK_VALUES)
    }

    /// W packed into `codes` and `values` (of [`Strips::lens`]; every value written).
    fn pack<L: Layout<Code = C>>(threads: Option<Threads<'_>>, w: CodeRows<'_>, codes: &'a mut [C], values: &'a mut [f32]) -> Result<Strips<'a, C>> {
        let (count, blocks) = (w.rows.div_ceil(L::STRIP), w.blocks);
        each_chunk_pair(threads, (codes, blocks * BLOCK * L::STRIP), (values, blocks * L::BLOCK_VALUES), |s, codes, values| {
            L::pack_strip(&w, s * L::STRIP, codes, values);
            Ok(())
        })?;
        Ok(Strips { codes, values, rows: w.rows, blocks, count })
    }

    fn strip<L: Layout<Code = C>>(&self, s: usize) -> Strip<'_, C> {
        let (codes, values) = (self.blocks * BLOCK * L::STRIP, self.blocks * L::BLOCK_VALUES);
        Strip { codes: &self.codes[s * codes..][..codes], values: &self.values[s * values..][..values], blocks: self.blocks }
    }
}

/// Rows first..first + N of W (None past its rows), for a layout's `pack_strip`.
fn strip_rows<'w, const N: usize>(w: &CodeRows<'w>, first: usize) -> [Option<&'w [u8]>; N] {
    std::array::from_fn(|j| (first + j < w.rows).then(|| w.codes_of(first + j)))
}

/// Block `b` of a row of W (from [`strip_rows`]) as 32 signed codes, zeros past W's rows.
fn block_of(row: Option<&[u8]>, b: usize, nibbles: bool) -> [i8; BLOCK] {
    match row {
        Some(row) if nibbles => block_codes::<true>(row, b),
        Some(row) => block_codes::<false>(row, b),
        None => [0; BLOCK],
    }
}

/// Row n's scale of block b, 0 past W's rows.
fn scale_of(w: &CodeRows<'_>, n: usize, b: usize) -> f32 {
    if n < w.rows {
        w.scales[n * w.blocks + b]
    } else {
        0.0
    }
}

/// A tile's rows of A: `codes` [TILE_ROWS, blocks · 32] and `scales` [TILE_ROWS, blocks] (rows
/// past M with zero scales).
#[derive(Clone, Copy)]
struct TileRows<'a, C> {
    codes: &'a [C],
    scales: &'a [f32],
    blocks: usize,
}

/// Whether a tile of layout L's rows `a` and strip `w` hold every value its kernel loads (the
/// fast paths rely on it), and `target` every value it stores.
fn is_whole<L: Layout>(a: &TileRows<'_, L::Code>, w: &Strip<'_, L::Code>, target: &TileTarget<'_>) -> bool {
    a.blocks == w.blocks
        && a.codes.len() == L::TILE_ROWS * a.blocks * BLOCK
        && a.scales.len() == L::TILE_ROWS * a.blocks
        && w.codes.len() == w.blocks * BLOCK * L::STRIP
        && w.values.len() == w.blocks * L::BLOCK_VALUES
        && (1..=L::TILE_ROWS).contains(&target.rows)
        && target.width <= L::STRIP
        && target.bias.len() == L::STRIP
        && target.c.len() >= (target.rows - 1) * target.c_rs + target.width
}

/// Where a tile's results go: its first `rows` rows into C from the strip's first column,
/// `c_rs` apart, each the strip's first `width` sums plus the strip's `bias`.
struct TileTarget<'a> {
    c: &'a mut [f32],
    c_rs: usize,
    rows: usize,
    width: usize,
    bias: &'a [f32],
}

impl TileTarget<'_> {
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

/// `product` for layout L: W packed into strips, bands of A's rows over threads, each band
/// quantized and passing every strip in tiles.
fn product_of<L: Layout>(threads: Option<Threads<'_>>, (a, a_rs, k): (&[f32], usize, usize), w: CodeRows<'_>, m: usize, target: Target<'_>) -> Result<()> {
    let Target { c, c_rs, bias } = target;
    let (n, blocks) = (w.rows, w.blocks);
    if m == 0 || n == 0 {
        return Ok(());
    }
    let [kept_strips, kept_band] = L::kept();
    with_kept(kept_strips, Strips::lens::<L>(&w), |codes, values| {
        let strips = Strips::pack::<L>(threads, w, codes, values)?;
        let most = BAND_ROWS / L::TILE_ROWS * L::TILE_ROWS;
        let band = m.div_ceil(pieces(threads, m, L::TILE_ROWS)).next_multiple_of(L::TILE_ROWS).min(most);
        each_chunk(threads, &mut c[..(m - 1) * c_rs + n], band * c_rs, |t, out| {
            let rows = band.min(m - t * band);
            // Whole tiles: the rows past M have zero codes and scales (and are not stored).
            let padded = rows.next_multiple_of(L::TILE_ROWS);
            with_kept(kept_band, (padded * blocks * BLOCK, padded * blocks), |codes, scales| {
                L::quantize_band(&a[t * band * a_rs..], a_rs, k, &mut codes[..rows * blocks * BLOCK], &mut scales[..rows * blocks]);
                codes[rows * blocks * BLOCK..].fill(L::Code::default());
                scales[rows * blocks..].fill(0.0);
                band_product::<L>((codes, scales, rows), &strips, Target { c: out, c_rs, bias });
                Ok(())
            })
        })
    })
}

/// C's rows of one band of A (its codes and scales, whole tiles; `rows` of them real) against
/// every strip of W, in tiles.
fn band_product<L: Layout>((codes, scales, rows): (&[L::Code], &[f32], usize), strips: &Strips<'_, L::Code>, target: Target<'_>) {
    let Target { c, c_rs, bias } = target;
    let blocks = strips.blocks;
    for s in 0..strips.count {
        let (first, width) = (s * L::STRIP, L::STRIP.min(strips.rows - s * L::STRIP));
        // The strip's bias, zeros where there is none (or past N), added as each tile is stored.
        let strip_bias: [f32; MAX_STRIP] = std::array::from_fn(|j| bias.filter(|_| j < width).map_or(0.0, |bias| bias[first + j]));
        for tile in (0..rows).step_by(L::TILE_ROWS) {
            let a = TileRows {
                codes: &codes[tile * blocks * BLOCK..][..L::TILE_ROWS * blocks * BLOCK],
                scales: &scales[tile * blocks..][..L::TILE_ROWS * blocks],
                blocks,
            };
            let target = TileTarget { c: &mut c[tile * c_rs + first..], c_rs, rows: L::TILE_ROWS.min(rows - tile), width, bias: &strip_bias[..L::STRIP] };
            L::tile(a, strips.strip::<L>(s), target);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::activation_codes::QuantizedRows;
    use super::*;
    use crate::quantize::{QuantFormat, Quantized};
    use rand::{rngs::StdRng, Rng, SeedableRng};

    /// Row n of A·Wᵀ for A's row i in f64, from exact integer block sums (W's codes by the
    /// library's plain-loop decoder `block_codes`).
    pub(super) fn reference<C: Copy + Into<i64>>(a: &QuantizedRows<C>, i: usize, w: &CodeRows<'_>, n: usize) -> f64 {
        (0..w.blocks)
            .map(|b| {
                let codes = if w.nibbles { block_codes::<true>(w.codes_of(n), b) } else { block_codes::<false>(w.codes_of(n), b) };
                let sum: i64 = (0..BLOCK).map(|j| a.codes[(i * w.blocks + b) * BLOCK + j].into() * codes[j] as i64).sum();
                a.scales[i * w.blocks + b] as f64 * w.scales[n * w.blocks + b] as f64 * sum as f64
            })
            .sum()
    }

    /// W of `rows` rows and `blocks` blocks at random: q8 bytes, or q4's nibble pairs, with
    /// scales 1 or 2.
    pub(super) fn code_rows(rng: &mut StdRng, rows: usize, blocks: usize, nibbles: bool) -> (Vec<u8>, Vec<f32>) {
        let bytes = rows * blocks * if nibbles { BLOCK / 2 } else { BLOCK };
        let codes = (0..bytes).map(|_| rng.random_range(-127..=127i8) as u8).collect();
        let scales = (0..rows * blocks).map(|_| if rng.random_bool(0.5) { 1.0 } else { 2.0 }).collect();
        (codes, scales)
    }

    /// Buffers for W's strips, holding what no packing writes (it must write every value).
    pub(super) fn buffers<L: Layout>(w: &CodeRows<'_>, fill: L::Code) -> (Vec<L::Code>, Vec<f32>) {
        let (codes, values) = Strips::lens::<L>(w);
        (vec![fill; codes], vec![f32::NAN; values])
    }

    /// A tile's sums through `L::tile` (the CPU's fastest path), stored with no bias.
    pub(super) fn fastest_sums<L: Layout>(a: TileRows<'_, L::Code>, w: Strip<'_, L::Code>) -> TileSums {
        let mut sums = [[f32::NAN; MAX_STRIP]; MAX_TILE_ROWS];
        let bias = [0.0; MAX_STRIP];
        L::tile(a, w, TileTarget { c: sums.as_flattened_mut(), c_rs: MAX_STRIP, rows: L::TILE_ROWS, width: L::STRIP, bias: &bias[..L::STRIP] });
        sums
    }

    /// Layout L's products (through this CPU's fastest tiles, plain loops where it has none)
    /// against the library's integer reference with A in `codes`.
    fn products_of_every_shape_match_the_reference_with<L: Layout>(layout: &str, codes: ActivationCodes) {
        let mut rng = StdRng::seed_from_u64(13);
        // M under a tile, past a band and not a multiple of a tile; N under a strip and past
        // one; K not a multiple of 32; each product after a larger one (the kept buffers hold
        // what it left).
        let shapes = [(3, 5, 40), (70, 33, 64), (9, 16, 100)];
        for ((m, n, k), format) in shapes.into_iter().flat_map(|shape| [(shape, QuantFormat::Q8), (shape, QuantFormat::Q4)]) {
            let a: Vec<f32> = (0..m * k).map(|_| rng.random_range(-2.0..2.0)).collect();
            let weights: Vec<f32> = (0..n * k).map(|_| rng.random_range(-1.0..1.0)).collect();
            let q = Quantized::quantize(format, &weights, n, k).unwrap();
            let w =
                CodeRows { codes: bytemuck::cast_slice(&q.words), scales: &q.scales, rows: n, blocks: k.div_ceil(BLOCK), nibbles: format == QuantFormat::Q4 };
            let bias: Vec<f32> = (0..n).map(|j| j as f32).collect();
            let want = q.integer_product_reference(&a, Some(&bias), codes).unwrap();
            let c_rs = n + 3;
            let mut c = vec![-1f32; m * c_rs];
            product_of::<L>(None, (&a, k, k), w, m, Target { c: &mut c, c_rs, bias: Some(&bias) }).unwrap();
            for i in 0..m {
                for j in 0..n {
                    let (got, want) = (c[i * c_rs + j], want[i * n + j]);
                    assert!((got - want).abs() <= 1e-4 * (1.0 + want.abs()), "{layout} {m}×{n}×{k} [{i}, {j}]: {got} for {want}");
                }
                assert!(c[i * c_rs + n..][..3].iter().all(|&v| v == -1.0), "{layout} {m}×{n}×{k}: row {i} past N is untouched");
            }
        }
    }

    /// Every layout's products, through their fastest tiles where this CPU has them (the plain
    /// loops elsewhere: the layouts' own tests compare the two; the relaxed tiles' fast path
    /// runs in wasm only, tests/int8_products.rs).
    #[test]
    fn products_of_every_shape_match_the_reference() {
        #[cfg(target_arch = "x86_64")]
        products_of_every_shape_match_the_reference_with::<pairs::Pairs>("pairs", ActivationCodes::I16);
        #[cfg(target_arch = "x86_64")]
        products_of_every_shape_match_the_reference_with::<quads::Quads>("quads", ActivationCodes::I8);
        products_of_every_shape_match_the_reference_with::<relaxed::Relaxed>("relaxed", ActivationCodes::I8);
    }
}
