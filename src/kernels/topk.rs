//! Params, kernel declarations and host twin of `shaders/topk.wgsl` (`ops::topk`).

use super::HostCall;
use super::{kernel_params, Access, Kernel, KernelParams};
use crate::error::Result;

pub(crate) const KERNEL: Kernel = Kernel {
    shader: "topk",
    source: include_str!(concat!(env!("OUT_DIR"), "/topk.wgsl")),
    entry: "topk",
    bindings: &[Access::Read, Access::ReadWrite, Access::ReadWrite],
    params: Params::LAYOUT,
    twin: Some(topk),
};

/// Every kernel of this module, for the checks over all kernels (`kernels::all`).
#[cfg(test)]
pub(crate) const KERNELS: &[&Kernel] = &[&KERNEL];

kernel_params! {
    pub(crate) struct Params {
        pub rows: u32,
        pub cols: u32,
        pub k: u32,
        pub _pad: u32,
    }
}

/// Index of "no element", last in the order (the WGSL's NONE).
const NONE: u32 = u32::MAX;

/// Whether (v, i) comes strictly before (w, j): value descending, then index ascending (the
/// WGSL's `before`; −0 and +0 tie, and NaNs compare as the WGSL's comparisons do).
fn before(v: f32, i: u32, w: f32, j: u32) -> bool {
    i != NONE && (j == NONE || v > w || (v == w && i < j))
}

/// x [rows, cols] → values f32 and indices u32 [rows, k]: each row's first k entries in the
/// order of [`before`]. The WGSL picks them in k passes; here one pass keeps the best k in
/// order, which gives the same picks. Picks past the end of a row are (0, NONE), as there.
pub(crate) fn topk(call: &mut HostCall<'_>) -> Result<()> {
    let p: Params = call.params()?;
    let x = call.read(0)?;
    let (values, indices) = (call.write(1)?, call.write_u32(2)?);
    let (rows, cols, k) = (p.rows as usize, p.cols as usize, p.k as usize);
    if x.len() < rows * cols || values.len() < rows * k || indices.len() < rows * k {
        return Err(call.fault(format!("{rows} rows of {cols} (k = {k}) do not fit the bindings")));
    }
    let mut best: Vec<(f32, u32)> = Vec::with_capacity(k + 1);
    for r in 0..rows {
        best.clear();
        for (c, &v) in x[r * cols..(r + 1) * cols].iter().enumerate() {
            let c = c as u32;
            if best.len() == k && !best.last().is_some_and(|&(w, j)| before(v, c, w, j)) {
                continue;
            }
            let at = best.partition_point(|&(w, j)| before(w, j, v, c));
            best.insert(at, (v, c));
            best.truncate(k);
        }
        let picks = best.iter().copied().chain(std::iter::repeat((0.0, NONE)));
        for ((value, index), (v, i)) in values[r * k..(r + 1) * k].iter_mut().zip(&mut indices[r * k..(r + 1) * k]).zip(picks) {
            *value = v;
            *index = i;
        }
    }
    Ok(())
}
