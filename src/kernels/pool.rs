//! Params, kernel declarations and host twins of `pool.wgsl` (`ops::pool`): ULMFiT's concat
//! pooling [last, max, mean] of x [B, T, C] over each sequence's window [start, end) of
//! positions (windows [B, 2] u32), and its backward. The max keeps the first position of the
//! largest value, as the shader's strict `>` does.

use super::HostCall;
use super::{kernel_params, Access, Kernel, KernelParams};
use crate::error::Result;

const SOURCE: &str = include_str!(concat!(env!("OUT_DIR"), "/pool.wgsl"));

pub(crate) const CONCAT_POOL: Kernel = Kernel {
    shader: "pool",
    source: SOURCE,
    entry: "concat_pool",
    // windows, x, pooled, argmax
    bindings: &[Access::Read, Access::Read, Access::ReadWrite, Access::ReadWrite],
    params: Params::LAYOUT,
    twin: Some(concat_pool),
};

pub(crate) const CONCAT_POOL_BACKWARD: Kernel = Kernel {
    shader: "pool",
    source: SOURCE,
    entry: "concat_pool_backward",
    // windows, d_pooled, argmax, d_x
    bindings: &[Access::Read, Access::Read, Access::Read, Access::ReadWrite],
    params: Params::LAYOUT,
    twin: Some(concat_pool_backward),
};

/// Every kernel of this module, for the checks over all kernels (`kernels::all`).
#[cfg(test)]
pub(crate) const KERNELS: &[&Kernel] = &[&CONCAT_POOL, &CONCAT_POOL_BACKWARD];

kernel_params! {
    pub(crate) struct Params {
        pub(crate) batch: u32,
        pub(crate) seq: u32,
        pub(crate) width: u32,
        pub _pad: u32,
    }
}

/// Each item's window (start, end) after checking that the bindings hold the params' sizes
/// and that every window is a non-empty range within T.
fn windows(call: &HostCall<'_>, p: &Params, windows: &[u32], bindings: &[(&str, usize, usize)]) -> Result<Vec<(usize, usize)>> {
    let (batch, seq) = (p.batch as usize, p.seq as usize);
    let Some(windows) = windows.get(..2 * batch) else {
        return Err(call.fault(format!("no windows of {batch} items are bound")));
    };
    if let Some((what, len, need)) = bindings.iter().find(|&&(_, len, need)| len < need) {
        return Err(call.fault(format!("{what} holds {len} elements, the params need {need}")));
    }
    windows
        .chunks_exact(2)
        .map(|w| match (w[0] as usize, w[1] as usize) {
            (start, end) if start < end && end <= seq => Ok((start, end)),
            (start, end) => Err(call.fault(format!("window [{start}, {end}) is empty or past T = {seq}"))),
        })
        .collect()
}

pub(crate) fn concat_pool(call: &mut HostCall<'_>) -> Result<()> {
    let p: Params = call.params()?;
    let (seq, width) = (p.seq as usize, p.width as usize);
    let (window_ids, x) = (call.read_u32(0)?, call.read(1)?);
    let (pooled, argmax) = (call.write(2)?, call.write_u32(3)?);
    let batch = p.batch as usize;
    let bindings = [("x", x.len(), batch * seq * width), ("pooled", pooled.len(), batch * 3 * width), ("argmax", argmax.len(), batch * width)];
    for (b, (start, end)) in windows(call, &p, window_ids, &bindings)?.into_iter().enumerate() {
        let row = |t: usize| &x[(b * seq + t) * width..][..width];
        let out = &mut pooled[b * 3 * width..][..3 * width];
        let (last, rest) = out.split_at_mut(width);
        let (top, mean) = rest.split_at_mut(width);
        last.copy_from_slice(row(end - 1));
        top.copy_from_slice(row(start));
        mean.fill(0.0);
        let at = &mut argmax[b * width..][..width];
        at.fill(start as u32);
        for t in start..end {
            for (c, &v) in row(t).iter().enumerate() {
                if v > top[c] {
                    top[c] = v;
                    at[c] = t as u32;
                }
                mean[c] += v;
            }
        }
        let count = (end - start) as f32;
        mean.iter_mut().for_each(|m| *m /= count);
    }
    Ok(())
}

pub(crate) fn concat_pool_backward(call: &mut HostCall<'_>) -> Result<()> {
    let p: Params = call.params()?;
    let (seq, width) = (p.seq as usize, p.width as usize);
    let (window_ids, d_pooled, argmax) = (call.read_u32(0)?, call.read(1)?, call.read_u32(2)?);
    let d_x = call.write(3)?;
    let batch = p.batch as usize;
    let bindings = [("d_pooled", d_pooled.len(), batch * 3 * width), ("argmax", argmax.len(), batch * width), ("d_x", d_x.len(), batch * seq * width)];
    for (b, (start, end)) in windows(call, &p, window_ids, &bindings)?.into_iter().enumerate() {
        let d = &d_pooled[b * 3 * width..][..3 * width];
        let count = (end - start) as f32;
        for t in 0..seq {
            let row = &mut d_x[(b * seq + t) * width..][..width];
            for (c, g) in row.iter_mut().enumerate() {
                let mut sum = 0.0;
                if t == end - 1 {
                    sum += d[c];
                }
                if t == argmax[b * width + c] as usize {
                    sum += d[width + c];
                }
                if (start..end).contains(&t) {
                    sum += d[2 * width + c] / count;
                }
                *g = sum;
            }
        }
    }
    Ok(())
}
