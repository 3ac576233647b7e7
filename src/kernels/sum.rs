//! Params, kernel declarations and host twins of `shaders/sum.wgsl` (`ops::sum`): column sums accumulated into a bias's
//! gradient, and one tensor's sum of squares into its slot (for the global gradient norm and
//! LAMB's trust ratio).
//!
//! Both add in the GPU's order, so that the host's clipping factor and trust ratios are the
//! GPU's (up to the fused multiply-adds a shader compiler may make).

use super::HostCall;
use super::{kernel_params, Access, Kernel, KernelParams};
use crate::error::Result;

const SOURCE: &str = concat!(include_str!(concat!(env!("OUT_DIR"), "/reduce.wgsl")), include_str!(concat!(env!("OUT_DIR"), "/sum.wgsl")));

const BINDINGS: &[Access] = &[Access::Read, Access::ReadWrite];

pub(crate) const COLUMN_SUMS: Kernel =
    Kernel { shader: "sum", source: SOURCE, entry: "column_sums", bindings: BINDINGS, params: Params::LAYOUT, twin: Some(column_sums) };

pub(crate) const SUM_SQUARES: Kernel =
    Kernel { shader: "sum", source: SOURCE, entry: "sum_squares", bindings: BINDINGS, params: Params::LAYOUT, twin: Some(sum_squares) };

/// Every kernel of this module, for the checks over all kernels (`kernels::all`).
#[cfg(test)]
pub(crate) const KERNELS: &[&Kernel] = &[&COLUMN_SUMS, &SUM_SQUARES];

kernel_params! {
    pub(crate) struct Params {
        pub rows: u32,
        pub cols: u32,
        pub slot: u32,
        pub _pad: u32,
    }
}

/// The WGSL's workgroup size: the lanes of `sum_squares`.
const WG: usize = 256;

/// x [rows, cols] → out [cols] += Σ_r x[r, c]. On the GPU one invocation per column sums the
/// rows in order into a zeroed total and adds it to out once; here the totals of all columns
/// advance a row at a time.
pub(crate) fn column_sums(call: &mut HostCall<'_>) -> Result<()> {
    let p: Params = call.params()?;
    let (x, out) = (call.read(0)?, call.write(1)?);
    let (rows, cols) = (p.rows as usize, p.cols as usize);
    if cols == 0 {
        return Ok(());
    }
    if rows.checked_mul(cols).is_none_or(|len| x.len() < len) || out.len() < cols {
        return Err(call.fault(format!("{rows} rows of {cols} do not fit the bindings")));
    }
    let mut totals = vec![0.0f32; cols];
    for row in x.chunks_exact(cols).take(rows) {
        for (total, &v) in totals.iter_mut().zip(row) {
            *total += v;
        }
    }
    for (o, &total) in out[..cols].iter_mut().zip(&totals) {
        *o += total;
    }
    Ok(())
}

/// x [cols] (all elements of a tensor) → out[slot] = Σ x²; the rest of out is untouched. As the
/// GPU's single workgroup: invocation t sums x[t]², x[t + 256]², … in order, then the 256
/// partials are added in a tree (reduce.wgsl's `workgroup_sum`: stride 128, 64, …, 1).
pub(crate) fn sum_squares(call: &mut HostCall<'_>) -> Result<()> {
    let p: Params = call.params()?;
    let (x, out) = (call.read(0)?, call.write(1)?);
    let (n, slot) = (p.cols as usize, p.slot as usize);
    if x.len() < n || slot >= out.len() {
        return Err(call.fault(format!("{n} elements and slot {slot} do not fit the bindings")));
    }
    let mut partial = [0.0f32; WG];
    for chunk in x[..n].chunks(WG) {
        for (s, &v) in partial.iter_mut().zip(chunk) {
            *s += v * v;
        }
    }
    let mut stride = WG / 2;
    while stride > 0 {
        let (low, high) = partial.split_at_mut(stride);
        for (a, &b) in low.iter_mut().zip(&high[..stride]) {
            *a += b;
        }
        stride /= 2;
    }
    out[slot] = partial[0];
    Ok(())
}
