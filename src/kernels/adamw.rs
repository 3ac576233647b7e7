//! Params, kernel declarations and host twins of `shaders/adamw.wgsl` (`ops::adamw`): the clipping factor from the global
//! gradient norm (`clip_scale`), PyTorch's AdamW step (`adamw`) and LAMB's two halves
//! (`lamb_update`, then `lamb_apply` once `ops::sum` has put the squared norms of the
//! parameter and of the update in their slots).
//!
//! Every update is per element in the WGSL's f32 order; the step count lives only in the
//! bias corrections, which the op computes (bc1 = 1 − β1^t, √bc2 = √(1 − β2^t)).

use super::{each_chunk, pieces, HostCall, MIN_SPLIT_VALUES};
use super::{kernel_params, Access, Kernel, KernelParams};
use crate::error::Result;

const SOURCE: &str = include_str!(concat!(env!("OUT_DIR"), "/adamw.wgsl"));

pub(crate) const ADAMW: Kernel = Kernel {
    shader: "adamw",
    source: SOURCE,
    entry: "adamw",
    bindings: &[Access::ReadWrite, Access::Read, Access::ReadWrite, Access::ReadWrite, Access::Read],
    params: Params::LAYOUT,
    twin: Some(adamw),
};

pub(crate) const LAMB_UPDATE: Kernel = Kernel {
    shader: "adamw",
    source: SOURCE,
    entry: "lamb_update",
    bindings: &[Access::ReadWrite, Access::ReadWrite, Access::ReadWrite, Access::ReadWrite, Access::Read],
    params: Params::LAYOUT,
    twin: Some(lamb_update),
};

pub(crate) const LAMB_APPLY: Kernel = Kernel {
    shader: "adamw",
    source: SOURCE,
    entry: "lamb_apply",
    bindings: &[Access::ReadWrite, Access::Read, Access::Read],
    params: Params::LAYOUT,
    twin: Some(lamb_apply),
};

pub(crate) const CLIP_SCALE: Kernel = Kernel {
    shader: "adamw",
    source: SOURCE,
    entry: "clip_scale",
    bindings: &[Access::Read, Access::ReadWrite],
    params: Params::LAYOUT,
    twin: Some(clip_scale),
};

/// Every kernel of this module, for the checks over all kernels (`kernels::all`).
#[cfg(test)]
pub(crate) const KERNELS: &[&Kernel] = &[&ADAMW, &LAMB_UPDATE, &LAMB_APPLY, &CLIP_SCALE];

kernel_params! {
    #[derive(Default)]
    pub(crate) struct Params {
        pub n: u32,
        pub lr: f32,
        pub beta1: f32,
        pub beta2: f32,
        pub eps: f32,
        pub weight_decay: f32,
        pub bias_correction1: f32,
        pub bias_correction2_sqrt: f32,
        pub max_norm: f32,
        pub slot: u32,
        pub adapt: u32,
        pub _pad: u32,
    }
}

/// sums [n] (one Σ g² per parameter) → norm_scale [2] = [norm, scale]: norm = √Σ sums, scale
/// = min(1, max_norm / (norm + 1e-6)), or 1 when max_norm ≤ 0 (no clipping). The GPU runs
/// this in one invocation: a running f32 sum in slot order, as here.
pub(crate) fn clip_scale(call: &mut HostCall<'_>) -> Result<()> {
    let p: Params = call.params()?;
    let (sums, norm_scale) = (call.read(0)?, call.write(1)?);
    let n = p.n as usize;
    if sums.len() < n || norm_scale.len() < 2 {
        return Err(call.fault(format!("{n} slots do not fit the bindings")));
    }
    // A fold from +0.0, not `sum()` (which starts from −0.0 and would give √−0 = −0 for no slots).
    let norm = sums[..n].iter().fold(0.0f32, |total, &s| total + s).sqrt();
    norm_scale[0] = norm;
    // WGSL's min(1, NaN) may be either operand; Rust's is 1.
    norm_scale[1] = if p.max_norm > 0.0 { 1.0f32.min(p.max_norm / (norm + 1e-6)) } else { 1.0 };
    Ok(())
}

/// The WGSL's `adam_direction`: updates one element's moments from the clipped gradient `g`,
/// m += (1 − β1)(g − m) and v = β2·v + (1 − β2)·g², and returns m / (√v / √bc2 + eps), Adam's
/// direction times bc1.
#[inline(always)]
fn adam_direction(p: &Params, m: &mut f32, v: &mut f32, g: f32) -> f32 {
    *m += (1.0 - p.beta1) * (g - *m);
    *v = p.beta2 * *v + (1.0 - p.beta2) * g * g;
    *m / (v.sqrt() / p.bias_correction2_sqrt + p.eps)
}

/// param, grad, m, v [n] and norm_scale [2] → param, m and v updated in place by one AdamW
/// step from g = grad·scale: decoupled weight decay first, param·(1 − lr·wd), then
/// − lr/bc1 · direction.
pub(crate) fn adamw(call: &mut HostCall<'_>) -> Result<()> {
    let p: Params = call.params()?;
    let threads = call.threads();
    let (grad, clip) = (call.read(1)?, call.read(4)?);
    let (param, m, v) = (call.write(0)?, call.write(2)?, call.write(3)?);
    let n = p.n as usize;
    if [param.len(), grad.len(), m.len(), v.len()].into_iter().any(|len| len < n) || clip.len() < 2 {
        return Err(call.fault(format!("{n} elements do not fit the bindings")));
    }
    let (scale, decay, step) = (clip[1], 1.0 - p.lr * p.weight_decay, p.lr / p.bias_correction1);
    // Split over the device's threads: pieces of the weights, each with its gradient and moments.
    let size = n.div_ceil(pieces(threads, n, MIN_SPLIT_VALUES));
    let mut parts: Vec<_> = param[..n].chunks_mut(size).zip(grad[..n].chunks(size)).zip(m[..n].chunks_mut(size)).zip(v[..n].chunks_mut(size)).collect();
    each_chunk(threads, &mut parts, 1, |_, parts| {
        for (((weights, grad), m), v) in parts.iter_mut() {
            for (((w, &g), m), v) in weights.iter_mut().zip(grad.iter()).zip(m.iter_mut()).zip(v.iter_mut()) {
                let direction = adam_direction(&p, m, v, g * scale);
                *w = *w * decay - step * direction;
            }
        }
        Ok(())
    })
}

pub(crate) fn lamb_update(call: &mut HostCall<'_>) -> Result<()> {
    let p: Params = call.params()?;
    let clip = call.read(4)?;
    let param: &[f32] = call.write(0)?;
    let (update, m, v) = (call.write(1)?, call.write(2)?, call.write(3)?);
    let n = p.n as usize;
    if [param.len(), update.len(), m.len(), v.len()].into_iter().any(|len| len < n) || clip.len() < 2 {
        return Err(call.fault(format!("{n} elements do not fit the bindings")));
    }
    let scale = clip[1];
    let elements = update[..n].iter_mut().zip(&param[..n]).zip(&mut m[..n]).zip(&mut v[..n]);
    for (((u, &w), m), v) in elements {
        *u = adam_direction(&p, m, v, *u * scale) / p.bias_correction1 + p.weight_decay * w;
    }
    Ok(())
}

/// param, update [n] and lamb_sums (‖param‖², ‖u‖² at slot, slot + 1) → param −= lr·ratio·u,
/// with the trust ratio ‖param‖ / ‖u‖ when the adaptation is on (adapt == 1) and both squared
/// norms are positive (NaN ones are not), else 1.
pub(crate) fn lamb_apply(call: &mut HostCall<'_>) -> Result<()> {
    let p: Params = call.params()?;
    let (update, sums) = (call.read(1)?, call.read(2)?);
    let param = call.write(0)?;
    let (n, slot) = (p.n as usize, p.slot as usize);
    let Some(&[w2, u2]) = sums.get(slot..).and_then(|s| s.get(..2)) else {
        return Err(call.fault(format!("slot {slot} and the next are outside the {} sums", sums.len())));
    };
    if param.len() < n || update.len() < n {
        return Err(call.fault(format!("{n} elements do not fit the bindings")));
    }
    let ratio = if p.adapt == 1 && w2 > 0.0 && u2 > 0.0 { w2.sqrt() / u2.sqrt() } else { 1.0 };
    let step = p.lr * ratio;
    for (w, &u) in param[..n].iter_mut().zip(&update[..n]) {
        *w -= step * u;
    }
    Ok(())
}
