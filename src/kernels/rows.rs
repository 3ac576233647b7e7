//! Params, kernel declarations and host twin of `shaders/rows.wgsl` (`ops::rows`).

use super::HostCall;
use super::{kernel_params, Access, Kernel, KernelParams};
use crate::error::Result;

pub(crate) const KERNEL: Kernel = Kernel {
    shader: "rows",
    source: include_str!(concat!(env!("OUT_DIR"), "/rows.wgsl")),
    entry: "copy_rows",
    bindings: &[Access::Read, Access::Read, Access::ReadWrite],
    params: Params::LAYOUT,
    twin: Some(copy_rows),
};

/// Every kernel of this module, for the checks over all kernels (`kernels::all`).
#[cfg(test)]
pub(crate) const KERNELS: &[&Kernel] = &[&KERNEL];

kernel_params! {
    pub(crate) struct Params {
        pub pairs: u32,
        pub width: u32,
        pub dst_stride: u32,
        pub col_offset: u32,
        pub src_stride: u32,
        pub src_offset: u32,
    }
}

/// map [pairs, 2] of (src row, dst row), src [rows, src_stride] → dst [rows', dst_stride]:
/// each pair copies columns src_offset..src_offset + width of its src row into its dst row at
/// columns col_offset..col_offset + width; the rest of dst is left as it is.
pub(crate) fn copy_rows(call: &mut HostCall<'_>) -> Result<()> {
    let p: Params = call.params()?;
    let (map, src, dst) = (call.read_u32(0)?, call.read(1)?, call.write(2)?);
    let (pairs, width, stride, offset) = (p.pairs as usize, p.width as usize, p.dst_stride as usize, p.col_offset as usize);
    let (src_stride, src_offset) = (p.src_stride as usize, p.src_offset as usize);
    if map.len() < 2 * pairs {
        return Err(call.fault(format!("{pairs} pairs do not fit a map of {} ids", map.len())));
    }
    for pair in map.chunks_exact(2).take(pairs) {
        let (s, d) = (pair[0] as usize, pair[1] as usize);
        let from = src.get(s * src_stride + src_offset..).and_then(|row| row.get(..width));
        let to = dst.get_mut(d * stride + offset..).and_then(|row| row.get_mut(..width));
        match (from, to) {
            (Some(from), Some(to)) => to.copy_from_slice(from),
            _ => return Err(call.fault(format!("pair ({s}, {d}) is outside src or dst"))),
        }
    }
    Ok(())
}
