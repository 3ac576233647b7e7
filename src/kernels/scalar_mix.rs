//! Params, kernel declarations and host twins of `scalar_mix.wgsl` (`ops::scalar_mix`), for x [B, L, N], s [L] and γ [1],
//! with w = softmax(s):
//! - `mix`: out[b, n] = γ · Σⱼ wⱼ · x[b, j, n], out [B, N];
//! - `mix_backward` (training): from d_out [B, N], with gⱼ = Σ_{b,n} d_out[b, n]·x[b, j, n],
//!   adds dγ = Σⱼ wⱼgⱼ into d_gamma [1] and γ·wⱼ·(gⱼ − dγ) into d_s [L]. The shader is one
//!   workgroup of 256 whose invocations sum every 256th element, then add their partial sums
//!   as a tree; the twin sums in the same order.

use super::HostCall;
use super::{kernel_params, Access, Kernel, KernelParams};
use crate::error::Result;

const SOURCE: &str = concat!(include_str!(concat!(env!("OUT_DIR"), "/reduce.wgsl")), include_str!(concat!(env!("OUT_DIR"), "/scalar_mix.wgsl")));

pub(crate) const MIX: Kernel = Kernel {
    shader: "scalar_mix",
    source: SOURCE,
    entry: "mix",
    // x, s, gamma, out
    bindings: &[Access::Read, Access::Read, Access::Read, Access::ReadWrite],
    params: Params::LAYOUT,
    twin: Some(mix),
};

pub(crate) const MIX_BACKWARD: Kernel = Kernel {
    shader: "scalar_mix",
    source: SOURCE,
    entry: "mix_backward",
    // x, s, gamma, d_out, d_s, d_gamma
    bindings: &[Access::Read, Access::Read, Access::Read, Access::Read, Access::ReadWrite, Access::ReadWrite],
    params: Params::LAYOUT,
    twin: Some(mix_backward),
};

/// Every kernel of this module, for the checks over all kernels (`kernels::all`).
#[cfg(test)]
pub(crate) const KERNELS: &[&Kernel] = &[&MIX, &MIX_BACKWARD];

/// The most layers a mix takes (the shader's `MAX_LAYERS`).
pub const MAX_LAYERS: usize = 32;

kernel_params! {
    pub(crate) struct Params {
        pub(crate) batch: u32,
        pub(crate) layers: u32,
        pub(crate) width: u32,
        pub _pad: u32,
    }
}

/// Invocations of `mix_backward`'s one workgroup (the shader's `WG`).
const WG: usize = 256;

pub(crate) fn mix(call: &mut HostCall<'_>) -> Result<()> {
    let p: Params = call.params()?;
    let (x, s, gamma, out) = (call.read(0)?, call.read(1)?, call.read(2)?, call.write(3)?);
    let (layers, width) = (p.layers as usize, p.width as usize);
    if width == 0 || layers == 0 {
        return Ok(());
    }
    let weights = layer_weights(&s[..layers]);
    let gamma = gamma[0];
    for (sample, row) in x.chunks_exact(layers * width).zip(out.chunks_exact_mut(width)).take(p.batch as usize) {
        // The layers' sum in the shader's order (j ascending), then scaled by γ.
        row.fill(0.0);
        for (&w, layer) in weights.iter().zip(sample.chunks_exact(width)) {
            for (o, &v) in row.iter_mut().zip(layer) {
                *o += w * v;
            }
        }
        for o in row.iter_mut() {
            *o *= gamma;
        }
    }
    Ok(())
}

pub(crate) fn mix_backward(call: &mut HostCall<'_>) -> Result<()> {
    use crate::kernels::scalar_mix::MAX_LAYERS;
    let p: Params = call.params()?;
    let (x, s, gamma, d_out) = (call.read(0)?, call.read(1)?, call.read(2)?, call.read(3)?);
    let (d_s, d_gamma) = (call.write(4)?, call.write(5)?);
    let (batch, layers, width) = (p.batch as usize, p.layers as usize, p.width as usize);
    let elements = batch.saturating_mul(width);
    let fits = layers <= MAX_LAYERS
        && x.len() >= elements.saturating_mul(layers)
        && d_out.len() >= elements
        && s.len() >= layers
        && d_s.len() >= layers
        && !gamma.is_empty()
        && !d_gamma.is_empty();
    if !fits {
        return Err(call.fault(format!("a mix of {layers} layers of [{batch}, {width}] does not fit the bindings")));
    }
    // gⱼ as the workgroup sums it: invocation t adds elements t, t + 256, … in order, then the
    // partial sums are added in halves (workgroup_sum of reduce.wgsl).
    let grads: Vec<f32> = (0..layers)
        .map(|j| {
            let mut partial = [0f32; WG];
            let products = (0..batch).flat_map(move |b| d_out[b * width..][..width].iter().zip(&x[(b * layers + j) * width..][..width]));
            for (i, (&d, &v)) in products.enumerate() {
                partial[i % WG] += d * v;
            }
            let mut half = WG / 2;
            while half > 0 {
                let (low, high) = partial[..2 * half].split_at_mut(half);
                for (a, &b) in low.iter_mut().zip(&*high) {
                    *a += b;
                }
                half /= 2;
            }
            partial[0]
        })
        .collect();
    let weights = if layers == 0 { Vec::new() } else { layer_weights(&s[..layers]) };
    // Σₖ wₖgₖ: dγ, and what each gⱼ is compared with for dsⱼ.
    let mean = weights.iter().zip(&grads).fold(0f32, |m, (&w, &g)| m + w * g);
    for ((d, &w), &g) in d_s.iter_mut().zip(&weights).zip(&grads) {
        *d += gamma[0] * w * (g - mean);
    }
    d_gamma[0] += mean;
    Ok(())
}

/// softmax(s) in f32, as the shader computes it: exp(s − max) over their sum.
fn layer_weights(s: &[f32]) -> Vec<f32> {
    let top = s.iter().copied().fold(s[0], f32::max);
    let mut w: Vec<f32> = s.iter().map(|&v| (v - top).exp()).collect();
    let total: f32 = w.iter().sum();
    for v in &mut w {
        *v /= total;
    }
    w
}
