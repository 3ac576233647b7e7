//! Params, kernel declarations and host twin of the matmul kernels' strided params ([`Params`]):
//! C[b, i, c_off + j] = Σ_k A[b, i, k]·B[b, k, j] (+ bias[c_off + j]) (+ C, accumulating).
//!
//! Fast paths for row-major A (the usual case): 4×8 blocks of C held in eight vectors while K
//! streams, each step broadcasting four values of A against eight of B. With many rows, B
//! (A·B or A·Bᵀ alike) is first packed into panels of 8 columns laid out along K, and A into
//! blocks of 4 rows likewise, so that a block reads memory in order; packing is O(N·K) against the product's O(M·N·K). With few
//! rows (decoding) packing would cost as much as the product: A·B then reads B's rows in
//! place, and A·Bᵀ takes dot products along K. Aᵀ (training's weight gradients) is packed
//! through its strides; other layouts take a plain strided loop.

use super::simd::{dot, F32x4, Lanes};
use super::{each_chunk, pieces, scratch, HostCall, Threads, MIN_SPLIT_WORK};
use super::{kernel_params, Access, Kernel, KernelParams};
use crate::error::Result;

const BINDINGS: &[Access] = &[Access::Read, Access::Read, Access::Read, Access::ReadWrite];

pub(crate) const TILED: Kernel = Kernel {
    shader: "matmul_tiled",
    source: include_str!(concat!(env!("OUT_DIR"), "/matmul_tiled.wgsl")),
    entry: "matmul_tiled",
    bindings: BINDINGS,
    params: Params::LAYOUT,
    twin: Some(matmul),
};

pub(crate) const BLOCKED: Kernel = Kernel {
    shader: "matmul_blocked",
    source: concat!(include_str!(concat!(env!("OUT_DIR"), "/matmul_store.wgsl")), include_str!(concat!(env!("OUT_DIR"), "/matmul_blocked.wgsl"))),
    entry: "matmul_blocked",
    bindings: BINDINGS,
    params: Params::LAYOUT,
    twin: None,
};

const VEC4_SOURCE: &str =
    concat!(include_str!(concat!(env!("OUT_DIR"), "/matmul_store.wgsl")), include_str!(concat!(env!("OUT_DIR"), "/matmul_blocked_vec4.wgsl")));

pub(crate) const BLOCKED_NN: Kernel =
    Kernel { shader: "matmul_blocked_vec4", source: VEC4_SOURCE, entry: "matmul_nn", bindings: BINDINGS, params: Vec4Params::LAYOUT, twin: None };

pub(crate) const BLOCKED_NT: Kernel =
    Kernel { shader: "matmul_blocked_vec4", source: VEC4_SOURCE, entry: "matmul_nt", bindings: BINDINGS, params: Vec4Params::LAYOUT, twin: None };

pub(crate) const BLOCKED_NN_ROW: Kernel =
    Kernel { shader: "matmul_blocked_vec4", source: VEC4_SOURCE, entry: "matmul_nn_row", bindings: BINDINGS, params: Vec4Params::LAYOUT, twin: None };

pub(crate) const BLOCKED_NT_ROW: Kernel =
    Kernel { shader: "matmul_blocked_vec4", source: VEC4_SOURCE, entry: "matmul_nt_row", bindings: BINDINGS, params: Vec4Params::LAYOUT, twin: None };

/// Every kernel of this module, for the checks over all kernels (`kernels::all`).
#[cfg(test)]
pub(crate) const KERNELS: &[&Kernel] = &[&TILED, &BLOCKED, &BLOCKED_NN, &BLOCKED_NT, &BLOCKED_NN_ROW, &BLOCKED_NT_ROW];

kernel_params! {
    /// Params of `matmul_blocked_vec4.wgsl`: lengths and batch strides in vec4s.
    pub(crate) struct Vec4Params {
        pub m: u32,
        pub n: u32,
        pub k4: u32,
        pub has_bias: u32,
        pub a_bs: u32,
        pub b_bs: u32,
        pub c_bs: u32,
        pub c_rs: u32,
        pub c_off: u32,
        pub accumulate: u32,
        pub _pad: [u32; 2],
    }
}

kernel_params! {
    /// Params of the tiled and scalar-blocked kernels and of the host twin: lengths, then row,
    /// column and batch strides in elements (they express the transposed forms).
    pub(crate) struct Params {
        pub m: u32,
        pub n: u32,
        pub k: u32,
        pub has_bias: u32,
        pub a_rs: u32,
        pub a_cs: u32,
        pub a_bs: u32,
        pub c_bs: u32,
        pub b_rs: u32,
        pub b_cs: u32,
        pub b_bs: u32,
        pub c_rs: u32,
        pub c_off: u32,
        pub accumulate: u32,
        pub _pad: [u32; 2],
    }
}

/// Rows of C in a block, and columns in a panel (two vectors).
const ROWS: usize = 4;
const PANEL: usize = 8;
/// Rows of A kept hot in cache while a group of panels passes over them.
const ROW_PANEL: usize = 64;
/// Panels of B packed at a time: bounds the scratch memory (GPT-2's tied LM head would
/// otherwise be copied whole).
const GROUP_PANELS: usize = 64;
/// From this many rows on, B is packed into panels.
const PACK_FROM_ROWS: usize = 4;

pub(crate) fn matmul(call: &mut HostCall<'_>) -> Result<()> {
    let p: Params = call.params()?;
    #[cfg(not(target_arch = "wasm32"))]
    let native = call.native_gemm();
    let (a, b, bias, c) = (call.read(0)?, call.read(1)?, call.optional_read(2)?, call.write(3)?);
    let batches = c.len() / (p.c_bs as usize).max(1);
    for batch in 0..batches {
        let start = |stride: u32| batch.saturating_mul(stride as usize);
        let (Some(a), Some(b)) = (a.get(start(p.a_bs)..), b.get(start(p.b_bs)..)) else {
            return Err(call.fault(format!("batch {batch} of A (stride {}) or B (stride {}) does not fit the bindings", p.a_bs, p.b_bs)));
        };
        let c = &mut c[start(p.c_bs)..];
        let mut out = Output { c, c_rs: p.c_rs as usize, c_off: p.c_off as usize, bias: bias.filter(|_| p.has_bias != 0), accumulate: p.accumulate != 0 };
        multiply(
            call,
            a,
            b,
            &p,
            &mut out,
            #[cfg(not(target_arch = "wasm32"))]
            native,
        )?;
    }
    Ok(())
}

/// out = op(A)·op(B) for one batch, as `p` lays the operands out (bounds checked first):
/// natively through gemm where `native` has the threads to use (`None` computes as the browser
/// does), else the hand-written blocks, split over the call's threads.
pub(super) fn multiply(
    call: &HostCall<'_>,
    a: &[f32],
    b: &[f32],
    p: &Params,
    out: &mut Output<'_>,
    #[cfg(not(target_arch = "wasm32"))] native: Option<Option<Threads<'_>>>,
) -> Result<()> {
    check_bounds(a, b, p, out).map_err(|message| call.fault(message))?;
    #[cfg(not(target_arch = "wasm32"))]
    if let Some(threads) = native.filter(|_| p.n > 0 && p.k > 0) {
        product_gemm(a, b, p, out, threads);
        return Ok(());
    }
    split_product(call.threads(), a, b, p, out)
}

/// The hand-written product over `threads`: many rows are cut into bands of rows (each writes
/// its own rows of C); few rows (decoding) into bands of columns, each computed into scratch
/// memory and then stored (their columns interleave in C's rows). Bounds are checked already.
fn split_product(threads: Option<Threads<'_>>, a: &[f32], b: &[f32], p: &Params, out: &mut Output<'_>) -> Result<()> {
    let (m, n, k) = (p.m as usize, p.n as usize, p.k as usize);
    if m == 0 || n == 0 {
        return Ok(());
    }
    // Every band computes as the whole product would: packed when the whole has the rows for
    // it, so that a short last band sums in the same order as the others.
    let pack = m >= PACK_FROM_ROWS;
    let work_per = |items: usize| MIN_SPLIT_WORK.div_ceil(items.saturating_mul(k).max(1));
    let row_pieces = pieces(threads, m, work_per(n).max(ROWS));
    if let Some(layout) = layout_of(p).filter(|_| row_pieces > 1 && pack && k > 0) {
        // A and each group of B's panels are packed once, and the bands of rows share them.
        return product_packed((threads, row_pieces), a, (p.a_rs as usize, p.a_cs as usize), b, layout, m, n, k, out);
    }
    if row_pieces > 1 {
        // Rows of C do not overlap (m > 1: c_rs ≥ n), so bands of c_rs·rows from column
        // c_off hold whole rows (C's binding may go on past the M rows: other batches).
        let band = m.div_ceil(row_pieces).next_multiple_of(ROWS);
        let (c_rs, accumulate) = (out.c_rs, out.accumulate);
        let bias = out.bias.map(|bias| &bias[out.c_off..]);
        let rows_of_c = &mut out.c[out.c_off..][..(m - 1) * c_rs + n];
        return each_chunk(threads, rows_of_c, band * c_rs, |i, c| {
            let first = i * band;
            let rows = band.min(m - first);
            let piece = Params { m: rows as u32, ..*p };
            let a = a.get(first * p.a_rs as usize..).unwrap_or_default();
            product_one(a, b, &piece, &mut Output { c, c_rs, c_off: 0, bias, accumulate }, pack)
        });
    }
    let col_pieces = pieces(threads, n, work_per(m).max(PANEL));
    if col_pieces == 1 {
        return product_one(a, b, p, out, pack);
    }
    let width = n.div_ceil(col_pieces).next_multiple_of(PANEL);
    let mut bands = scratch(m * n)?;
    each_chunk(threads, &mut bands, m * width, |i, c| {
        let first = i * width;
        let cols = width.min(n - first);
        let piece = Params { n: cols as u32, ..*p };
        let b = b.get(first * p.b_cs as usize..).unwrap_or_default();
        product_one(a, b, &piece, &mut Output { c, c_rs: cols, c_off: 0, bias: None, accumulate: false }, pack)
    })?;
    for (i, band) in bands.chunks(m * width).enumerate() {
        let cols = band.len() / m.max(1);
        for (row, values) in band.chunks_exact(cols).enumerate() {
            values.iter().enumerate().for_each(|(j, &value)| out.store(row, i * width + j, value));
        }
    }
    Ok(())
}

/// The hand-written product of one band on the calling thread, by the operands' layout
/// (packed blocks where `pack`, the whole product having the rows for them).
fn product_one(a: &[f32], b: &[f32], p: &Params, out: &mut Output<'_>, pack: bool) -> Result<()> {
    let (m, n, k) = (p.m as usize, p.n as usize, p.k as usize);
    match layout_of(p) {
        // Aᵀ (the weight gradients' dW = Xᵀ·dY) is packed like A, through its strides.
        Some(layout) if pack && k > 0 => product_packed((None, 1), a, (p.a_rs as usize, p.a_cs as usize), b, layout, m, n, k, out),
        Some(layout) if p.a_cs == 1 => product(a, p.a_rs as usize, b, layout, m, n, k, out),
        _ => {
            product_strided(a, b, p, out);
            Ok(())
        }
    }
}

/// How B is stored: as [K, N] (B's rows, of this stride) or as [N, K] (the rows of Bᵀ).
#[derive(Clone, Copy)]
pub(super) enum Layout {
    Rows(usize),
    Columns(usize),
}

/// B's layout in `p`; None for other strides.
fn layout_of(p: &Params) -> Option<Layout> {
    match (p.b_cs, p.b_rs) {
        (1, b_rs) => Some(Layout::Rows(b_rs as usize)),
        (b_cs, 1) => Some(Layout::Columns(b_cs as usize)),
        _ => None,
    }
}

/// out = A·B for row-major A (M rows of stride `a_rs`, K used): packed blocks for many rows,
/// B read in place for few.
#[allow(clippy::too_many_arguments)]
pub(super) fn product(a: &[f32], a_rs: usize, b: &[f32], layout: Layout, m: usize, n: usize, k: usize, out: &mut Output<'_>) -> Result<()> {
    match layout {
        // An empty sum (a head of size 0): the blocks below need K ≥ 1.
        _ if k == 0 => (0..m).for_each(|row| (0..n).for_each(|col| out.store(row, col, 0.0))),
        _ if m >= PACK_FROM_ROWS => product_packed((None, 1), a, (a_rs, 1), b, layout, m, n, k, out)?,
        Layout::Rows(b_rs) => product_rows(a, a_rs, b, b_rs, m, n, k, out)?,
        Layout::Columns(b_rs) => product_dots(a, a_rs, b, b_rs, m, n, k, out),
    }
    Ok(())
}

/// An error unless every element the product reads lies within `a` and `b` (and the bias),
/// and every one it writes within C, C's rows not overlapping: gemm reads and writes through
/// raw pointers and writes rows from several threads at once, and the portable loops index.
fn check_bounds(a: &[f32], b: &[f32], p: &Params, out: &Output<'_>) -> std::result::Result<(), String> {
    let (m, n, k) = (p.m as usize, p.n as usize, p.k as usize);
    let (a_rs, a_cs, b_rs, b_cs, c_rs) = (p.a_rs as usize, p.a_cs as usize, p.b_rs as usize, p.b_cs as usize, out.c_rs);
    // One past the last element an operand of `rows` × `cols` spans (0 when it has none).
    let end = |rs: usize, cs: usize, rows: usize, cols: usize| match (rows.checked_sub(1), cols.checked_sub(1)) {
        (Some(last_row), Some(last_col)) => last_row.checked_mul(rs)?.checked_add(last_col.checked_mul(cs)?)?.checked_add(1),
        _ => Some(0),
    };
    let fits = |end: Option<usize>, len: usize| end.is_some_and(|end| end <= len);
    let (rows_of_c, rows_of_a) = if n == 0 { (0, 0) } else { (m, m) };
    let c_end = end(c_rs, 1, rows_of_c, n).and_then(|end| end.checked_add(out.c_off));
    let bias_end = out.c_off.checked_add(n);
    let fit = fits(end(a_rs, a_cs, rows_of_a, k), a.len())
        && fits(end(b_rs, b_cs, k, n), b.len())
        && fits(c_end, out.c.len())
        && (m <= 1 || c_rs >= n)
        && out.bias.is_none_or(|bias| fits(bias_end, bias.len()));
    match fit {
        true => Ok(()),
        false => {
            Err(format!("{m}×{k}·{k}×{n} with strides A ({a_rs}, {a_cs}), B ({b_rs}, {b_cs}), C {c_rs} from column {} does not fit the bindings", out.c_off))
        }
    }
}

/// Where a block of C goes (rows of stride `c_rs`, from column `c_off`), and what is added.
pub(super) struct Output<'c> {
    pub c: &'c mut [f32],
    pub c_rs: usize,
    pub c_off: usize,
    pub bias: Option<&'c [f32]>,
    pub accumulate: bool,
}

impl Output<'_> {
    fn store(&mut self, row: usize, col: usize, value: f32) {
        let at = row * self.c_rs + self.c_off + col;
        let mut v = value + self.bias.map_or(0.0, |bias| bias[self.c_off + col]);
        if self.accumulate {
            v += self.c[at];
        }
        self.c[at] = v;
    }

    /// The first `height` rows and `width` columns of an R×8 block at (row, col).
    fn store_block<const R: usize>(&mut self, row: usize, col: usize, height: usize, width: usize, acc: &[[F32x4; 2]; R]) {
        if width == PANEL {
            // Whole rows of the block, in vectors: what `store` does, element for element.
            let bias = self.bias.map(|bias| F32x4::load_pair(bias[self.c_off + col..][..PANEL].try_into().expect("8 columns")));
            for (r, &[mut low, mut high]) in acc.iter().enumerate().take(height) {
                let at = (row + r) * self.c_rs + self.c_off + col;
                let c: &mut [f32; PANEL] = (&mut self.c[at..at + PANEL]).try_into().expect("8 columns");
                if let Some((b0, b1)) = bias {
                    (low, high) = (low.add(b0), high.add(b1));
                }
                if self.accumulate {
                    let (c0, c1) = F32x4::load_pair(c);
                    (low, high) = (low.add(c0), high.add(c1));
                }
                c[..4].copy_from_slice(&low.to_array());
                c[4..].copy_from_slice(&high.to_array());
            }
            return;
        }
        for (r, halves) in acc.iter().enumerate().take(height) {
            let values = [halves[0].to_array(), halves[1].to_array()];
            for j in 0..width {
                self.store(row + r, col + j, values[j / 4][j % 4]);
            }
        }
    }
}

/// B as [K, N] (rows of stride `b_rs`) packed into panels: panel p holds, for each l, columns
/// 8p..8p + 8 of row l (zeros past N).
fn pack_rows(b: &[f32], b_rs: usize, n: usize, k: usize) -> Result<Vec<f32>> {
    let mut packed = scratch(n.div_ceil(PANEL) * k * PANEL)?;
    for l in 0..k {
        for (p, cols) in b[l * b_rs..][..n].chunks(PANEL).enumerate() {
            packed[(p * k + l) * PANEL..][..cols.len()].copy_from_slice(cols);
        }
    }
    Ok(packed)
}

/// The first `count` rows of `m` (element (i, l) at i·rs + l·cs, K columns used) interleaved
/// in blocks of `WIDTH` rows laid out along K: block i holds, for each l, m[WIDTH·i + r, l]
/// for r in 0..WIDTH (zeros past the last row). With WIDTH = 8 these are B's panels packed
/// from Bᵀ (B as [N, K]); with WIDTH = 4, A's blocks of rows (or of Aᵀ's, cs ≠ 1).
fn interleave_rows<const WIDTH: usize>(m: &[f32], (rs, cs): (usize, usize), count: usize, k: usize) -> Result<Vec<f32>> {
    let mut packed = scratch(count.div_ceil(WIDTH) * k * WIDTH)?;
    for i in 0..count {
        let block = &mut packed[(i / WIDTH) * k * WIDTH..][..k * WIDTH];
        let slots = block[i % WIDTH..].iter_mut().step_by(WIDTH);
        if cs == 1 {
            slots.zip(&m[i * rs..][..k]).for_each(|(slot, &v)| *slot = v);
        } else {
            slots.enumerate().for_each(|(l, slot)| *slot = m[i * rs + l * cs]);
        }
    }
    Ok(packed)
}

/// One 4×8 block of C from a block of packed A and a panel of packed B. Written out by hand:
/// at opt-level "s" an array of accumulators indexed in a loop would live in memory.
#[inline(always)]
fn block(a_block: &[f32], b_panel: &[f32]) -> [[F32x4; 2]; ROWS] {
    let zero = F32x4::zero();
    let (mut c00, mut c01, mut c10, mut c11, mut c20, mut c21, mut c30, mut c31) = (zero, zero, zero, zero, zero, zero, zero, zero);
    for (a, b) in a_block.as_chunks::<ROWS>().0.iter().zip(b_panel.as_chunks::<PANEL>().0) {
        let (b0, b1) = F32x4::load_pair(b);
        let a0 = F32x4::splat(a[0]);
        c00 = c00.mul_add(a0, b0);
        c01 = c01.mul_add(a0, b1);
        let a1 = F32x4::splat(a[1]);
        c10 = c10.mul_add(a1, b0);
        c11 = c11.mul_add(a1, b1);
        let a2 = F32x4::splat(a[2]);
        c20 = c20.mul_add(a2, b0);
        c21 = c21.mul_add(a2, b1);
        let a3 = F32x4::splat(a[3]);
        c30 = c30.mul_add(a3, b0);
        c31 = c31.mul_add(a3, b1);
    }
    [[c00, c01], [c10, c11], [c20, c21], [c30, c31]]
}

/// One 1×8 block of C: a row of A against 8 columns of B, `b_row(l)` giving row l's 8.
#[inline(always)]
fn row_block<'b>(a_row: &[f32], b_row: impl Fn(usize) -> &'b [f32; PANEL]) -> [[F32x4; 2]; 1] {
    let (mut c0, mut c1) = (F32x4::zero(), F32x4::zero());
    for (l, &a) in a_row.iter().enumerate() {
        let (b0, b1) = F32x4::load_pair(b_row(l));
        let av = F32x4::splat(a);
        c0 = c0.mul_add(av, b0);
        c1 = c1.mul_add(av, b1);
    }
    [[c0, c1]]
}

/// A (M rows; element (i, l) at i·a_rs + l·a_cs) · B, both packed: A once, B a group of
/// panels at a time, each group shared by `bands` bands of rows (over `threads`; each writes
/// its own rows of C). Every element sums along K as one band would.
#[allow(clippy::too_many_arguments)]
fn product_packed(
    (threads, bands): (Option<Threads<'_>>, usize),
    a: &[f32],
    a_strides: (usize, usize),
    b: &[f32],
    layout: Layout,
    m: usize,
    n: usize,
    k: usize,
    out: &mut Output<'_>,
) -> Result<()> {
    if m == 0 || n == 0 {
        return Ok(());
    }
    let a_blocks = interleave_rows::<ROWS>(a, a_strides, m, k)?;
    let band = m.div_ceil(bands.max(1)).next_multiple_of(ROWS);
    // Rows of C do not overlap (m > 1: c_rs ≥ n), so bands of c_rs·rows from column c_off
    // hold whole rows (C's binding may go on past the M rows: other batches).
    let (c_rs, accumulate) = (out.c_rs, out.accumulate);
    let bias = out.bias.map(|bias| &bias[out.c_off..]);
    let rows_of_c = &mut out.c[out.c_off..][..(m - 1) * c_rs + n];
    for group_start in (0..n).step_by(GROUP_PANELS * PANEL) {
        let cols = (GROUP_PANELS * PANEL).min(n - group_start);
        let panels = match layout {
            Layout::Rows(b_rs) => pack_rows(&b[group_start..], b_rs, cols, k)?,
            Layout::Columns(b_rs) => interleave_rows::<PANEL>(&b[group_start * b_rs..], (b_rs, 1), cols, k)?,
        };
        each_chunk(threads, rows_of_c, band * c_rs, |i, c| {
            let (first, rows) = (i * band, band.min(m - i * band));
            let mut out = Output { c, c_rs, c_off: 0, bias, accumulate };
            let band_blocks = &a_blocks[first * k..][..rows.next_multiple_of(ROWS) * k];
            for (q, row_panel) in band_blocks.chunks(ROW_PANEL * k).enumerate() {
                for (p, b_panel) in panels.chunks_exact(k * PANEL).enumerate() {
                    let (col, width) = (group_start + p * PANEL, PANEL.min(cols - p * PANEL));
                    for (i, a_block) in row_panel.chunks_exact(k * ROWS).enumerate() {
                        let row = q * ROW_PANEL + i * ROWS;
                        out.store_block(row, col, ROWS.min(rows - row), width, &block(a_block, b_panel));
                    }
                }
            }
            Ok(())
        })?;
    }
    Ok(())
}

/// A (a few rows) · B ([K, N], rows of stride `b_rs`) reading B in place, a row of C at a
/// time; the last columns (fewer than 8) are packed.
#[allow(clippy::too_many_arguments)]
fn product_rows(a: &[f32], a_rs: usize, b: &[f32], b_rs: usize, m: usize, n: usize, k: usize, out: &mut Output<'_>) -> Result<()> {
    let whole = n - n % PANEL;
    let tail = if whole < n { Some(pack_rows(&b[whole..], b_rs, n - whole, k)?) } else { None };
    for row in 0..m {
        let a_row = &a[row * a_rs..][..k];
        for col in (0..whole).step_by(PANEL) {
            out.store_block(row, col, 1, PANEL, &row_block(a_row, |l| b[l * b_rs + col..][..PANEL].try_into().expect("8 columns")));
        }
        if let Some(panel) = &tail {
            out.store_block(row, whole, 1, n - whole, &row_block(a_row, |l| &panel.as_chunks::<PANEL>().0[l]));
        }
    }
    Ok(())
}

/// A (a few rows) · Bᵀ (B: N rows of stride `b_rs`): a dot product along K per element.
/// Bound by reading B (GPT-2's LM head is 77 MB a token); four columns at a time sharing
/// the loads of A measured slower in wasm (107 against 155 tokens/s).
#[allow(clippy::too_many_arguments)]
fn product_dots(a: &[f32], a_rs: usize, b: &[f32], b_rs: usize, m: usize, n: usize, k: usize, out: &mut Output<'_>) {
    for row in 0..m {
        let a_row = &a[row * a_rs..][..k];
        for col in 0..n {
            out.store(row, col, dot(a_row, &b[col * b_rs..][..k]));
        }
    }
}

/// Any strides (Aᵀ in training's weight gradients): one dot product per element.
fn product_strided(a: &[f32], b: &[f32], p: &Params, out: &mut Output<'_>) {
    let (a_rs, a_cs, b_rs, b_cs) = (p.a_rs as usize, p.a_cs as usize, p.b_rs as usize, p.b_cs as usize);
    for row in 0..p.m as usize {
        for col in 0..p.n as usize {
            let sum = (0..p.k as usize).map(|l| a[row * a_rs + l * a_cs] * b[l * b_rs + col * b_cs]).sum();
            out.store(row, col, sum);
        }
    }
}

/// C (m rows of stride `c_rs`, n contiguous columns) = A·B for A m×k and B k×n of any strides
/// (element (i, l) of A at i·rs + l·cs), on the calling thread: natively through gemm, in the
/// browser (and on the portable host device) by the hand-written product. The training twins'
/// products over one head (attention's forward and backward). Bounds are checked as a
/// matmul's.
#[allow(clippy::too_many_arguments)]
pub(super) fn strided_product(
    call: &HostCall<'_>,
    a: &[f32],
    (a_rs, a_cs): (usize, usize),
    b: &[f32],
    (b_rs, b_cs): (usize, usize),
    c: &mut [f32],
    c_rs: usize,
    (m, n, k): (usize, usize, usize),
) -> Result<()> {
    let word = |x: usize| u32::try_from(x).map_err(|_| call.fault(format!("{x} is more than a kernel param holds")));
    let p = Params {
        m: word(m)?,
        n: word(n)?,
        k: word(k)?,
        a_rs: word(a_rs)?,
        a_cs: word(a_cs)?,
        b_rs: word(b_rs)?,
        b_cs: word(b_cs)?,
        c_rs: word(c_rs)?,
        ..bytemuck::Zeroable::zeroed()
    };
    let mut out = Output { c, c_rs, c_off: 0, bias: None, accumulate: false };
    check_bounds(a, b, &p, &out).map_err(|message| call.fault(message))?;
    match (m, n, k) {
        (0, _, _) | (_, 0, _) => {}
        // An empty sum: gemm wants K ≥ 1.
        (_, _, 0) => (0..m).for_each(|row| out.c[row * c_rs..][..n].fill(0.0)),
        #[cfg(not(target_arch = "wasm32"))]
        _ if call.native_gemm().is_some() => product_gemm(a, b, &p, &mut out, None),
        _ => split_product(None, a, b, &p, &mut out)?,
    }
    Ok(())
}

/// Natively, for any rows (a single row too: gemm splits its GEMV over the pool, which took
/// GPT-2's f32 decoding from 104 to 50 ms a token on two threads): C = op(A)·op(B) (+ bias) (+ C) by the `gemm` crate
/// (cache-blocked packing, AVX2/AVX-512/NEON kernels picked at run time), split over the
/// device's pool where it has one; it reads any strides, so transposed operands need no copy.
#[cfg(not(target_arch = "wasm32"))]
fn product_gemm(a: &[f32], b: &[f32], p: &Params, out: &mut Output<'_>, threads: Option<Threads<'_>>) {
    let (m, n, k) = (p.m as usize, p.n as usize, p.k as usize);
    let (a_rs, a_cs, b_rs, b_cs, c_rs) = (p.a_rs as usize, p.a_cs as usize, p.b_rs as usize, p.b_cs as usize, out.c_rs);
    // The bias first (C = bias, or C + bias when accumulating), then C += A·B.
    if let Some(bias) = out.bias {
        let bias = &bias[out.c_off..][..n];
        for row in 0..m {
            let c_row = &mut out.c[row * c_rs + out.c_off..][..n];
            for (c, &b) in c_row.iter_mut().zip(bias) {
                *c = if out.accumulate { *c + b } else { b };
            }
        }
    }
    let read_dst = out.accumulate || out.bias.is_some();
    let parallelism = threads.map_or(gemm::Parallelism::None, |threads| gemm::Parallelism::Rayon(threads.count()));
    let c = &mut out.c[out.c_off..];
    let mut product = move || {
        // SAFETY: `check_bounds` kept every element gemm reads within `a` and `b` and every
        // one it writes within `c` (rows that do not overlap), an exclusive borrow that
        // aliases neither.
        unsafe {
            gemm::gemm(
                m,
                n,
                k,
                c.as_mut_ptr(),
                1,
                c_rs as isize,
                read_dst,
                a.as_ptr(),
                a_cs as isize,
                a_rs as isize,
                b.as_ptr(),
                b_cs as isize,
                b_rs as isize,
                1.0,
                1.0,
                false,
                false,
                false,
                parallelism,
            )
        }
    };
    match threads {
        Some(threads) => threads.install(product),
        None => product(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 2×3·3×2 product, row-major, into a 2×2 C.
    fn params() -> Params {
        Params { m: 2, n: 2, k: 3, a_rs: 3, a_cs: 1, b_rs: 2, b_cs: 1, c_rs: 2, ..bytemuck::Zeroable::zeroed() }
    }

    #[test]
    fn operands_that_do_not_fit_their_bindings_are_refused() {
        let (a, b, mut c, bias) = ([0.0; 6], [0.0; 6], [0.0; 4], [0.0; 2]);
        let fits = |p: Params, c: &mut [f32], c_off: usize, bias: Option<&[f32]>| {
            check_bounds(&a, &b, &p, &Output { c, c_rs: p.c_rs as usize, c_off, bias, accumulate: false }).is_ok()
        };
        assert!(fits(params(), &mut c, 0, Some(&bias)));
        // Aᵀ's strides read the same six elements; an empty product reads and writes nothing.
        assert!(fits(Params { a_rs: 1, a_cs: 2, ..params() }, &mut c, 0, None));
        assert!(fits(Params { n: 0, ..params() }, &mut [], 0, None));
        assert!(fits(Params { k: 0, ..params() }, &mut c, 0, None));
        // One element past A, B, C or the bias; C's rows overlapping; strides far past the end.
        assert!(!fits(Params { a_rs: 4, ..params() }, &mut c, 0, None));
        assert!(!fits(Params { b_rs: 3, ..params() }, &mut c, 0, None));
        assert!(!fits(params(), &mut c, 1, None));
        assert!(!fits(params(), &mut c, 0, Some(&bias[..1])));
        assert!(!fits(Params { c_rs: 1, ..params() }, &mut c, 0, None));
        assert!(!fits(Params { a_cs: u32::MAX, a_rs: u32::MAX, ..params() }, &mut c, 0, None));
    }
}
