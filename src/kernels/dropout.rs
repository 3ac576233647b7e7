//! Params, kernel declarations and host twins of `shaders/dropout.wgsl` (`ops::dropout`):
//! inverted dropout (and its accumulating form) with the mask regenerated from its key by
//! [`MaskParams::factor`], the CPU mirror of `dropout_mask.wgsl`, so both devices drop the same
//! elements. Element i reads mask entry (i / group)·stride + i % inner.

use super::{each_chunk, pieces, HostCall, MIN_SPLIT_VALUES};
use super::{kernel_params, Access, Kernel, KernelParams};
use crate::error::Result;

const SOURCE: &str = concat!(include_str!(concat!(env!("OUT_DIR"), "/dropout_mask.wgsl")), include_str!(concat!(env!("OUT_DIR"), "/dropout.wgsl")));

pub(crate) const DROPOUT: Kernel =
    Kernel { shader: "dropout", source: SOURCE, entry: "dropout", bindings: &[Access::Read, Access::ReadWrite], params: Params::LAYOUT, twin: Some(dropout) };

pub(crate) const DROPOUT_ACCUMULATE: Kernel = Kernel {
    shader: "dropout",
    source: SOURCE,
    entry: "dropout_accumulate",
    bindings: &[Access::Read, Access::ReadWrite],
    params: Params::LAYOUT,
    twin: Some(dropout_accumulate),
};

/// Every kernel of this module, for the checks over all kernels (`kernels::all`).
#[cfg(test)]
pub(crate) const KERNELS: &[&Kernel] = &[&DROPOUT, &DROPOUT_ACCUMULATE];

kernel_params! {
    pub(crate) struct Params {
        pub n: u32,
        pub mask: MaskParams,
        /// Element i reads mask entry (i / group)·stride + i % inner.
        pub group: u32,
        pub stride: u32,
        pub inner: u32,
    }
}

kernel_params! {
    /// The mask's four words as the kernels take them: threshold, scale, key low, key high.
    #[derive(Default)]
    pub(crate) struct MaskParams {
        pub threshold: u32,
        pub scale: f32,
        pub key0: u32,
        pub key1: u32,
    }
}

impl MaskParams {
    /// The factor element `index` is multiplied by: 0 (dropped) or `scale` (kept). The CPU
    /// mirror of `dropout_factor` in dropout_mask.wgsl (the reference, and the attention twin).
    pub(crate) fn factor(&self, index: u32) -> f32 {
        let hash = fmix32(fmix32(index.wrapping_mul(0x9e37_79b1).wrapping_add(self.key0)) ^ self.key1);
        if hash >= self.threshold {
            self.scale
        } else {
            0.0
        }
    }
}

/// MurmurHash3's 32-bit finalizer, as in dropout_mask.wgsl.
fn fmix32(mut h: u32) -> u32 {
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

/// x [n] → y [n] = x·factor(index(i)): 0 where the entry is dropped, 1/(1 − p) where kept.
pub(crate) fn dropout(call: &mut HostCall<'_>) -> Result<()> {
    each_factor(call, |y, x, factor| *y = x * factor)
}

/// y [n] += x·factor(index(i)).
pub(crate) fn dropout_accumulate(call: &mut HostCall<'_>) -> Result<()> {
    each_factor(call, |y, x, factor| *y += x * factor)
}

/// Calls `f(y[i], x[i], factor)` for every element after checking the bindings and the map.
fn each_factor(call: &mut HostCall<'_>, f: impl Fn(&mut f32, f32, f32) + Sync + Send) -> Result<()> {
    let p: Params = call.params()?;
    let threads = call.threads();
    let (x, y) = (call.read(0)?, call.write(1)?);
    let n = p.n as usize;
    if x.len() < n || y.len() < n {
        return Err(call.fault(format!("{n} elements do not fit the bindings")));
    }
    if p.group == 0 || p.inner == 0 {
        return Err(call.fault("a mask map with a zero group or inner size".into()));
    }
    let size = n.div_ceil(pieces(threads, n, MIN_SPLIT_VALUES));
    each_chunk(threads, &mut y[..n], size, |piece, y| {
        let first = piece * size;
        // The mask index of element i, (i / group)·stride + i % inner, kept as counters
        // rather than divided for every element.
        let (group, inner) = (p.group as usize, p.inner as usize);
        let (mut in_group, mut in_inner) = (first % group, first % inner);
        let mut group_start = (first / group) * p.stride as usize;
        for (y, &x) in y.iter_mut().zip(&x[first..]) {
            f(y, x, p.mask.factor((group_start + in_inner) as u32));
            (in_group, in_inner) = (in_group + 1, in_inner + 1);
            if in_inner == inner {
                in_inner = 0;
            }
            if in_group == group {
                (in_group, group_start) = (0, group_start + p.stride as usize);
            }
        }
        Ok(())
    })
}
