//! What the layouts of W in quads share (`quads` natively, `relaxed` in wasm): their plain-loop
//! packing and tile, the reference their fast paths match. A's codes are unsigned bytes (the
//! code plus the layout's offset); W's stay signed bytes, four consecutive codes of a row side by side
//! in a strip of STRIP rows. In strip s for block b and quad q (codes 4q..4q + 4 of the block),
//! `codes[s][(8b + q) · 4 · STRIP + 4j + t]` = code 32b + 4q + t of row STRIP · s + j;
//! `values[s][2 · STRIP · b + j]` that row's scale of block b and `values[s][2 · STRIP · b +
//! STRIP + j]` −offset · Σ of its block's codes (the offset's share of the block's sum, exact in
//! f32: at most 2^19), which each block's sums start from.

use super::{block_of, scale_of, strip_rows, CodeRows, Strip, TileRows, TileSums, BLOCK, MAX_STRIP, MAX_TILE_ROWS};

/// Codes a lane multiplies at once.
pub(super) const QUAD: usize = 4;

/// A strip of STRIP rows of W from row `first` (zeros past W's rows) into `codes` (blocks · 32
/// · STRIP) and `values` (blocks · 2 · STRIP), in plain loops, for A's codes offset by `offset`.
pub(super) fn pack_strip_portable<const STRIP: usize>(w: &CodeRows<'_>, first: usize, offset: i32, codes: &mut [u8], values: &mut [f32]) {
    let rows = strip_rows::<STRIP>(w, first);
    for (b, (codes, values)) in codes.chunks_exact_mut(BLOCK * STRIP).zip(values.chunks_exact_mut(2 * STRIP)).enumerate() {
        let (scales, offsets) = values.split_at_mut(STRIP);
        for (j, &row) in rows.iter().enumerate() {
            let block = block_of(row, b, w.nibbles);
            for (q, quad) in block.as_chunks::<QUAD>().0.iter().enumerate() {
                codes[q * QUAD * STRIP + QUAD * j..][..QUAD].copy_from_slice(&quad.map(|code| code as u8));
            }
            offsets[j] = (-offset * block.iter().map(|&code| code as i32).sum::<i32>()) as f32;
            scales[j] = scale_of(w, first + j, b);
        }
    }
}

/// A tile of TILE_ROWS rows of A × a strip of STRIP rows of W in plain loops: every block's
/// exact sum (from the offsets' share), scaled and added in order; rows of [`MAX_STRIP`]
/// values, the first STRIP used.
pub(super) fn tile_portable<const STRIP: usize, const TILE_ROWS: usize>(a: TileRows<'_, u8>, w: Strip<'_, u8>) -> TileSums {
    let row_codes = a.blocks * BLOCK;
    let mut sums = [[0f32; MAX_STRIP]; MAX_TILE_ROWS];
    for (r, sums) in sums.iter_mut().enumerate().take(TILE_ROWS) {
        for (j, acc) in sums.iter_mut().enumerate().take(STRIP) {
            for b in 0..a.blocks {
                let values = &w.values[b * 2 * STRIP..];
                let products = (0..BLOCK).map(|i| {
                    let code = w.codes[b * BLOCK * STRIP + (i / QUAD) * QUAD * STRIP + QUAD * j + i % QUAD] as i8;
                    a.codes[r * row_codes + b * BLOCK + i] as i32 * code as i32
                });
                let sum = values[STRIP + j] as i32 + products.sum::<i32>();
                *acc += sum as f32 * (a.scales[r * a.blocks + b] * values[j]);
            }
        }
    }
    sums
}
