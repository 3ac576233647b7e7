//! Params, kernel declarations and host twin of `shaders/softmax.wgsl` (`ops::softmax`).

use super::lanes::softmax_in_place;
use super::HostCall;
use super::{kernel_params, Access, Kernel, KernelParams};
use crate::error::Result;

pub(crate) const KERNEL: Kernel = Kernel {
    shader: "softmax",
    source: concat!(include_str!(concat!(env!("OUT_DIR"), "/reduce.wgsl")), include_str!(concat!(env!("OUT_DIR"), "/softmax.wgsl"))),
    entry: "softmax",
    bindings: &[Access::Read, Access::Read, Access::ReadWrite],
    params: Params::LAYOUT,
    twin: Some(softmax),
};

/// Every kernel of this module, for the checks over all kernels (`kernels::all`).
#[cfg(test)]
pub(crate) const KERNELS: &[&Kernel] = &[&KERNEL];

/// Scores at or below this count as masked out.
pub const MASKED: f32 = -1.0e30;

kernel_params! {
    pub(crate) struct Params {
        pub rows: u32,
        pub cols: u32,
        pub has_mask: u32,
        pub group_rows: u32,
    }
}

/// x [rows, cols], optional mask [rows / group_rows, cols] → y [rows, cols] =
/// softmax(x + mask) over each row, max-subtracted. Entries ≤ MASKED (−1e30, covering −inf)
/// get 0, and a row with every entry masked is all zeros.
pub(crate) fn softmax(call: &mut HostCall<'_>) -> Result<()> {
    let p: Params = call.params()?;
    let x = call.read(0)?;
    let mask = if p.has_mask != 0 { Some(call.read(1)?) } else { None };
    let y = call.write(2)?;
    let (rows, cols, group_rows) = (p.rows as usize, p.cols as usize, p.group_rows as usize);
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    if x.len() < rows * cols || y.len() < rows * cols || (mask.is_some() && group_rows == 0) {
        return Err(call.fault(format!("{rows} rows of {cols} (mask rows of {group_rows}) do not fit the bindings")));
    }
    for (r, (x, y)) in x.chunks_exact(cols).zip(y.chunks_exact_mut(cols)).take(rows).enumerate() {
        // y holds x + mask, then exp(v − max), then the probabilities.
        match mask {
            Some(mask) => {
                let mask_row = mask.get(r / group_rows * cols..).and_then(|m| m.get(..cols));
                let mask_row = mask_row.ok_or_else(|| call.fault(format!("the mask row of row {r} is outside the mask")))?;
                for ((y, &x), &m) in y.iter_mut().zip(x).zip(mask_row) {
                    *y = x + m;
                }
            }
            None => y.copy_from_slice(x),
        }
        softmax_in_place(y, MASKED);
    }
    Ok(())
}
