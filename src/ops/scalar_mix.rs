//! ELMo's scalar mix (`shaders/scalar_mix.wgsl`): `out[b] = γ · Σⱼ softmax(s)ⱼ · x[b, j]` over
//! the L layers of x `[B, L, N]`, with s `[L]` and γ `[1]` on the GPU (a task's trainable mix), and
//! its backward into s and γ.

use super::{as_u32, expect_f32, expect_shape, grid_1d};
use crate::error::{shape_err, Result};
use crate::kernels::scalar_mix::{Params, MAX_LAYERS, MIX, MIX_BACKWARD};
use crate::tensor::{DType, Tensor};

/// Checks x [B, L, N], s [L] and γ [1]; returns the params.
fn check(op: &'static str, x: &Tensor, s: &Tensor, gamma: &Tensor) -> Result<Params> {
    expect_f32(op, "x", x, 3)?;
    let (batch, layers, width) = (x.shape()[0], x.shape()[1], x.shape()[2]);
    if !(1..=MAX_LAYERS).contains(&layers) {
        return Err(shape_err!(op, "a scalar mix takes 1 to {MAX_LAYERS} layers, got {layers}"));
    }
    expect_f32(op, "s", s, 1)?;
    expect_shape(op, "s", s, &[layers])?;
    expect_f32(op, "gamma", gamma, 1)?;
    expect_shape(op, "gamma", gamma, &[1])?;
    Ok(Params { batch: as_u32(op, "batch", batch)?, layers: layers as u32, width: as_u32(op, "width", width)?, _pad: 0 })
}

/// γ · Σⱼ softmax(s)ⱼ · x[:, j] for x [B, L, N]: [B, N].
pub fn scalar_mix(x: &Tensor, s: &Tensor, gamma: &Tensor) -> Result<Tensor> {
    let op = "scalar_mix";
    let params = check(op, x, s, gamma)?;
    let (batch, width) = (x.shape()[0], x.shape()[2]);
    let out = Tensor::empty(x.gpu(), &[batch, width], DType::F32)?;
    let gpu = x.gpu();
    gpu.dispatch(&MIX, &[], &params, &[x.into(), s.into(), gamma.into(), (&out).into()], grid_1d(gpu, batch * width, 256))?;
    Ok(out)
}

/// The backward of [`scalar_mix`] given d_out `[B, N]`: adds the gradients of s into `d_s` `[L]`
/// and of γ into `d_gamma` `[1]`. (x's gradient is not computed: the mixed layers are frozen.)
pub fn scalar_mix_backward(x: &Tensor, s: &Tensor, gamma: &Tensor, d_out: &Tensor, d_s: &Tensor, d_gamma: &Tensor) -> Result<()> {
    let op = "scalar_mix_backward";
    let params = check(op, x, s, gamma)?;
    expect_f32(op, "d_out", d_out, 2)?;
    expect_shape(op, "d_out", d_out, &[x.shape()[0], x.shape()[2]])?;
    expect_f32(op, "d_s", d_s, 1)?;
    expect_shape(op, "d_s", d_s, s.shape())?;
    expect_f32(op, "d_gamma", d_gamma, 1)?;
    expect_shape(op, "d_gamma", d_gamma, &[1])?;
    x.gpu().dispatch(&MIX_BACKWARD, &[], &params, &[x.into(), s.into(), gamma.into(), d_out.into(), d_s.into(), d_gamma.into()], [1, 1, 1])
}

/// softmax(s).
#[cfg(test)]
fn layer_weights_reference(s: &[f32]) -> Vec<f64> {
    let top = s.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let exps: Vec<f64> = s.iter().map(|&v| (v as f64 - top).exp()).collect();
    let total: f64 = exps.iter().sum();
    exps.iter().map(|e| e / total).collect()
}

#[cfg(test)]
/// CPU reference of [`scalar_mix`] for x `[B, L, width]` (row-major), s `[L]`: `[B, width]`.
pub(crate) fn scalar_mix_reference(x: &[f32], s: &[f32], gamma: f32, width: usize) -> Vec<f32> {
    let weights = layer_weights_reference(s);
    let mut out = Vec::with_capacity(x.len() / s.len());
    for sample in x.chunks(s.len() * width) {
        for n in 0..width {
            let mixed: f64 = weights.iter().enumerate().map(|(j, w)| w * sample[j * width + n] as f64).sum();
            out.push((gamma as f64 * mixed) as f32);
        }
    }
    out
}

#[cfg(test)]
/// CPU reference of [`scalar_mix_backward`]: (d_s, d_gamma).
pub(crate) fn scalar_mix_backward_reference(x: &[f32], s: &[f32], gamma: f32, width: usize, d_out: &[f32]) -> (Vec<f32>, f32) {
    let weights = layer_weights_reference(s);
    // g_j = Σ d_out · x[:, j]
    let mut g = vec![0f64; s.len()];
    for (sample, d) in x.chunks(s.len() * width).zip(d_out.chunks(width)) {
        for (j, gj) in g.iter_mut().enumerate() {
            *gj += sample[j * width..(j + 1) * width].iter().zip(d).map(|(&a, &b)| a as f64 * b as f64).sum::<f64>();
        }
    }
    let mean: f64 = weights.iter().zip(&g).map(|(w, g)| w * g).sum();
    let d_s = weights.iter().zip(&g).map(|(w, g)| (gamma as f64 * w * (g - mean)) as f32).collect();
    (d_s, mean as f32)
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::gpu::testing::devices;
    use crate::ops::testing::{assert_close, numeric_gradient, random_vec, rng};
    use pollster::block_on;

    #[test]
    fn backward_reference_matches_finite_differences() {
        let (batch, layers, width) = (2, 3, 5);
        let mut rng = rng(1);
        let (x, s, d_out) = (random_vec(&mut rng, batch * layers * width, 2.0), random_vec(&mut rng, layers, 1.0), random_vec(&mut rng, batch * width, 1.0));
        let gamma = 1.3;
        let loss = |s: &[f32], gamma: f32| scalar_mix_reference(&x, s, gamma, width).iter().zip(&d_out).map(|(&o, &d)| o as f64 * d as f64).sum::<f64>();
        let (d_s, d_gamma) = scalar_mix_backward_reference(&x, &s, gamma, width, &d_out);
        assert_close("scalar mix ds vs finite differences", &d_s, &numeric_gradient(&s, 1e-3, |v| loss(v, gamma)), 1e-3, 1e-3);
        assert_close("scalar mix dγ vs finite differences", &[d_gamma], &numeric_gradient(&[gamma], 1e-3, |v| loss(&s, v[0])), 1e-3, 1e-3);
    }

    #[test]
    fn mix_and_backward_match_reference() {
        let mut rng = rng(2);
        // Widths below, at and above a workgroup; one layer (softmax weight 1).
        for (batch, layers, width) in [(1, 1, 1), (3, 3, 7), (2, 5, 256), (4, 2, 300)] {
            let (xv, sv, dv) = (random_vec(&mut rng, batch * layers * width, 2.0), random_vec(&mut rng, layers, 2.0), random_vec(&mut rng, batch * width, 1.0));
            let gamma_v = 0.7;
            for gpu in devices() {
                let up = |v: &[f32], shape: &[usize]| Tensor::from_slice(gpu, v, shape).unwrap();
                let (x, s, gamma) = (up(&xv, &[batch, layers, width]), up(&sv, &[layers]), up(&[gamma_v], &[1]));
                let got = block_on(scalar_mix(&x, &s, &gamma).unwrap().to_vec::<f32>()).unwrap();
                let what = format!("B{batch} L{layers} N{width} on {}", gpu.adapter_info().name);
                assert_close(&format!("scalar mix {what}"), &got, &scalar_mix_reference(&xv, &sv, gamma_v, width), 1e-5, 1e-5);
                // The gradients add to what the accumulators held.
                let (d_s, d_gamma) = (up(&vec![0.5; layers], &[layers]), up(&[-1.0], &[1]));
                scalar_mix_backward(&x, &s, &gamma, &up(&dv, &[batch, width]), &d_s, &d_gamma).unwrap();
                let (want_s, want_gamma) = scalar_mix_backward_reference(&xv, &sv, gamma_v, width, &dv);
                let want_s: Vec<f32> = want_s.iter().map(|g| g + 0.5).collect();
                assert_close(&format!("scalar mix ds {what}"), &block_on(d_s.to_vec::<f32>()).unwrap(), &want_s, 1e-4, 1e-4);
                assert_close(&format!("scalar mix dγ {what}"), &block_on(d_gamma.to_vec::<f32>()).unwrap(), &[want_gamma - 1.0], 1e-4, 1e-4);
            }
        }
    }

    #[test]
    fn bad_operands_are_errors() {
        for gpu in devices() {
            let x = Tensor::zeros(gpu, &[2, 3, 4], DType::F32).unwrap();
            let gamma = Tensor::zeros(gpu, &[1], DType::F32).unwrap();
            assert!(scalar_mix(&x, &Tensor::zeros(gpu, &[2], DType::F32).unwrap(), &gamma).is_err(), "s must have one scalar per layer");
            assert!(scalar_mix(
                &Tensor::zeros(gpu, &[1, MAX_LAYERS + 1, 2], DType::F32).unwrap(),
                &Tensor::zeros(gpu, &[MAX_LAYERS + 1], DType::F32).unwrap(),
                &gamma
            )
            .is_err());
            let s = Tensor::zeros(gpu, &[3], DType::F32).unwrap();
            assert!(scalar_mix_backward(&x, &s, &gamma, &Tensor::zeros(gpu, &[2, 5], DType::F32).unwrap(), &s, &gamma).is_err(), "d_out must be [B, N]");
        }
    }
}
