//! Host twin of `scalar_mix.wgsl`'s `mix` (`ops::scalar_mix`): out[b, n] = γ · Σⱼ wⱼ · x[b, j, n]
//! with w = softmax(s), for x [B, L, N], s [L], γ [1] and out [B, N].

use crate::error::Result;
use crate::host::HostCall;
use crate::ops::scalar_mix::Params;

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
