//! Adam's updates of one parameter tensor (`shaders/adamw.wgsl`): PyTorch's
//! `torch.optim.AdamW` step, and LAMB's (You et al. 2019, Algorithm 2: Adam's bias-corrected
//! direction plus weight decay, u = m̂ / (√v̂ + eps) + wd·param, scaled per tensor by the trust
//! ratio ‖param‖ / ‖u‖ before the step param −= lr·ratio·u); and the clipping factor from the
//! global gradient norm. The schedule, the parameter groups and the step count live in
//! `train::optim`.

use super::sum::sum_squares_into;
use super::{as_u32, expect_f32, expect_shape, grid_1d};
use crate::error::{shape_err, Result};
use crate::kernels::adamw::{Params, ADAMW, CLIP_SCALE, LAMB_APPLY, LAMB_UPDATE};
use crate::tensor::{DType, Tensor};

/// The hyperparameters of one step (t ≥ 1 is the step number, for the bias corrections).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamWStep {
    pub lr: f32,
    pub beta1: f32,
    pub beta2: f32,
    pub eps: f32,
    pub weight_decay: f32,
    pub t: u64,
}

impl AdamWStep {
    fn params(&self, n: u32) -> Params {
        let t = self.t.min(i32::MAX as u64) as i32;
        Params {
            n,
            lr: self.lr,
            beta1: self.beta1,
            beta2: self.beta2,
            eps: self.eps,
            weight_decay: self.weight_decay,
            bias_correction1: 1.0 - self.beta1.powi(t),
            bias_correction2_sqrt: (1.0 - self.beta2.powi(t)).sqrt(),
            ..Default::default()
        }
    }
}

/// `norm_scale` `[2]` = [global norm, clipping factor] from `sums` (one sum of squares per
/// parameter): factor min(1, max_norm/(norm + 1e-6)) as `torch.nn.utils.clip_grad_norm_`,
/// 1 when `max_norm` ≤ 0.
pub fn clip_scale(sums: &Tensor, max_norm: f32, norm_scale: &Tensor) -> Result<()> {
    let op = "clip_scale";
    expect_f32(op, "sums", sums, 1)?;
    expect_f32(op, "norm_scale", norm_scale, 1)?;
    expect_shape(op, "norm_scale", norm_scale, &[2])?;
    let params = Params { n: as_u32(op, "slots", sums.numel())?, max_norm, ..Default::default() };
    sums.gpu().dispatch(&CLIP_SCALE, &[], &params, &[sums.into(), norm_scale.into()], [1, 1, 1])
}

/// One AdamW step of `param` in place from `grad` times the clipping factor `norm_scale[1]`,
/// updating the moments `m` and `v` (all of param's shape).
pub fn adamw(param: &Tensor, grad: &Tensor, m: &Tensor, v: &Tensor, norm_scale: &Tensor, step: &AdamWStep) -> Result<()> {
    let op = "adamw";
    if param.dtype() != DType::F32 || param.numel() == 0 {
        return Err(shape_err!(op, "param must be a non-empty f32 tensor, got {:?}", param));
    }
    for (name, t) in [("grad", grad), ("m", m), ("v", v)] {
        expect_shape(op, name, t, param.shape())?;
    }
    expect_shape(op, "norm_scale", norm_scale, &[2])?;
    let params = step.params(as_u32(op, "elements", param.numel())?);
    let gpu = param.gpu();
    gpu.dispatch(&ADAMW, &[], &params, &[param.into(), grad.into(), m.into(), v.into(), norm_scale.into()], grid_1d(gpu, param.numel(), 256))
}

/// The hyperparameters of one LAMB step (t ≥ 1 is the step number, for the bias corrections).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LambStep {
    pub lr: f32,
    pub beta1: f32,
    pub beta2: f32,
    pub eps: f32,
    pub weight_decay: f32,
    /// Scale by the trust ratio (off for biases and LayerNorm gains, as ALBERT's LAMB).
    pub layer_adaptation: bool,
    pub t: u64,
}

/// One LAMB step of `param` in place from `grad` times the clipping factor `norm_scale[1]`,
/// updating the moments `m` and `v`; `grad` holds the update u afterwards, and
/// `norms[slot]`, `norms[slot + 1]` the squared norms of the parameter and of u.
#[allow(clippy::too_many_arguments)]
pub fn lamb(param: &Tensor, grad: &Tensor, m: &Tensor, v: &Tensor, norm_scale: &Tensor, norms: &Tensor, slot: usize, step: &LambStep) -> Result<()> {
    let op = "lamb";
    if param.dtype() != DType::F32 || param.numel() == 0 {
        return Err(shape_err!(op, "param must be a non-empty f32 tensor, got {:?}", param));
    }
    for (name, t) in [("grad", grad), ("m", m), ("v", v)] {
        expect_shape(op, name, t, param.shape())?;
    }
    expect_shape(op, "norm_scale", norm_scale, &[2])?;
    expect_f32(op, "norms", norms, 1)?;
    if slot + 1 >= norms.numel() {
        return Err(shape_err!(op, "slots {slot} and {} are outside norms {:?}", slot + 1, norms.shape()));
    }
    let adam = AdamWStep { lr: step.lr, beta1: step.beta1, beta2: step.beta2, eps: step.eps, weight_decay: step.weight_decay, t: step.t };
    let params = Params { slot: as_u32(op, "slot", slot)?, adapt: step.layer_adaptation as u32, ..adam.params(as_u32(op, "elements", param.numel())?) };
    let gpu = param.gpu();
    let grid = grid_1d(gpu, param.numel(), 256);
    gpu.dispatch(&LAMB_UPDATE, &[], &params, &[param.into(), grad.into(), m.into(), v.into(), norm_scale.into()], grid)?;
    sum_squares_into(param, norms, slot)?;
    sum_squares_into(grad, norms, slot + 1)?;
    gpu.dispatch(&LAMB_APPLY, &[], &params, &[param.into(), grad.into(), norms.into()], grid)
}

#[cfg(test)]
/// CPU reference of [`adamw`] in f64, updating the slices in place.
pub(crate) fn adamw_reference(param: &mut [f32], grad: &[f32], m: &mut [f32], v: &mut [f32], scale: f32, step: &AdamWStep) {
    let (b1, b2) = (step.beta1 as f64, step.beta2 as f64);
    let bc1 = 1.0 - b1.powi(step.t as i32);
    let bc2 = 1.0 - b2.powi(step.t as i32);
    for i in 0..param.len() {
        let g = grad[i] as f64 * scale as f64;
        let mi = m[i] as f64 + (1.0 - b1) * (g - m[i] as f64);
        let vi = b2 * v[i] as f64 + (1.0 - b2) * g * g;
        let decayed = param[i] as f64 * (1.0 - step.lr as f64 * step.weight_decay as f64);
        param[i] = (decayed - step.lr as f64 / bc1 * mi / (vi.sqrt() / bc2.sqrt() + step.eps as f64)) as f32;
        m[i] = mi as f32;
        v[i] = vi as f32;
    }
}

#[cfg(test)]
/// CPU reference of [`lamb`] in f64, updating the slices in place.
pub(crate) fn lamb_reference(param: &mut [f32], grad: &[f32], m: &mut [f32], v: &mut [f32], scale: f32, step: &LambStep) {
    let (b1, b2) = (step.beta1 as f64, step.beta2 as f64);
    let bc1 = 1.0 - b1.powi(step.t as i32);
    let bc2 = 1.0 - b2.powi(step.t as i32);
    let mut update = vec![0f64; param.len()];
    for i in 0..param.len() {
        let g = grad[i] as f64 * scale as f64;
        let mi = m[i] as f64 + (1.0 - b1) * (g - m[i] as f64);
        let vi = b2 * v[i] as f64 + (1.0 - b2) * g * g;
        update[i] = (mi / bc1) / ((vi / bc2).sqrt() + step.eps as f64) + step.weight_decay as f64 * param[i] as f64;
        m[i] = mi as f32;
        v[i] = vi as f32;
    }
    let norm = |x: &mut dyn Iterator<Item = f64>| x.map(|x| x * x).sum::<f64>().sqrt();
    let (w, u) = (norm(&mut param.iter().map(|&x| x as f64)), norm(&mut update.iter().copied()));
    let ratio = if step.layer_adaptation && w > 0.0 && u > 0.0 { w / u } else { 1.0 };
    for (p, u) in param.iter_mut().zip(&update) {
        *p = (*p as f64 - step.lr as f64 * ratio * u) as f32;
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::gpu::testing::{devices, every_device};
    use crate::ops::testing::{assert_close, random_vec, rng};
    use pollster::block_on;

    #[test]
    fn three_adamw_steps_match_reference() {
        for gpu in every_device() {
            let device = &gpu.adapter_info().name;
            let mut rng = rng(1);
            let n = 1000;
            let mut pv = random_vec(&mut rng, n, 1.0);
            let (mut mv, mut vv) = (vec![0f32; n], vec![0f32; n]);
            let param = Tensor::from_slice(gpu, &pv, &[10, 100]).unwrap();
            let m = Tensor::zeros(gpu, &[10, 100], DType::F32).unwrap();
            let v = Tensor::zeros(gpu, &[10, 100], DType::F32).unwrap();
            let sums = Tensor::zeros(gpu, &[1], DType::F32).unwrap();
            let norm_scale = Tensor::zeros(gpu, &[2], DType::F32).unwrap();
            for t in 1..=3 {
                let gv = random_vec(&mut rng, n, 0.5);
                let grad = Tensor::from_slice(gpu, &gv, &[10, 100]).unwrap();
                // Clipping to norm 2 (the gradients' norm is about 9).
                sum_squares_into(&grad, &sums, 0).unwrap();
                clip_scale(&sums, 2.0, &norm_scale).unwrap();
                let step = AdamWStep { lr: 1e-2 * t as f32, beta1: 0.9, beta2: 0.95, eps: 1e-8, weight_decay: 0.1, t };
                adamw(&param, &grad, &m, &v, &norm_scale, &step).unwrap();
                let norm = gv.iter().map(|g| (*g as f64).powi(2)).sum::<f64>().sqrt();
                let scale = (2.0 / (norm + 1e-6)).min(1.0) as f32;
                assert_close(&format!("norm and scale on {device}"), &block_on(norm_scale.to_vec::<f32>()).unwrap(), &[norm as f32, scale], 1e-5, 1e-5);
                adamw_reference(&mut pv, &gv, &mut mv, &mut vv, scale, &step);
                assert_close(&format!("param after step {t} on {device}"), &block_on(param.to_vec::<f32>()).unwrap(), &pv, 1e-6, 1e-5);
                assert_close(&format!("m after step {t} on {device}"), &block_on(m.to_vec::<f32>()).unwrap(), &mv, 1e-7, 1e-5);
                assert_close(&format!("v after step {t} on {device}"), &block_on(v.to_vec::<f32>()).unwrap(), &vv, 1e-9, 1e-5);
            }
        }
    }

    #[test]
    fn no_clipping_when_max_norm_is_zero() {
        for gpu in devices() {
            let sums = Tensor::from_slice(gpu, &[9.0f32, 16.0], &[2]).unwrap();
            let norm_scale = Tensor::zeros(gpu, &[2], DType::F32).unwrap();
            clip_scale(&sums, 0.0, &norm_scale).unwrap();
            assert_eq!(block_on(norm_scale.to_vec::<f32>()).unwrap(), vec![5.0, 1.0], "on {}", gpu.adapter_info().name);
        }
    }

    #[test]
    fn three_lamb_steps_match_reference_with_and_without_the_layer_adaptation() {
        for gpu in devices() {
            let device = &gpu.adapter_info().name;
            let mut rng = rng(2);
            let n = 700;
            for layer_adaptation in [true, false] {
                let mut pv = random_vec(&mut rng, n, 1.0);
                let (mut mv, mut vv) = (vec![0f32; n], vec![0f32; n]);
                let param = Tensor::from_slice(gpu, &pv, &[7, 100]).unwrap();
                let m = Tensor::zeros(gpu, &[7, 100], DType::F32).unwrap();
                let v = Tensor::zeros(gpu, &[7, 100], DType::F32).unwrap();
                let sums = Tensor::zeros(gpu, &[1], DType::F32).unwrap();
                let norm_scale = Tensor::zeros(gpu, &[2], DType::F32).unwrap();
                let norms = Tensor::zeros(gpu, &[4], DType::F32).unwrap();
                for t in 1..=3 {
                    let gv = random_vec(&mut rng, n, 0.5);
                    let grad = Tensor::from_slice(gpu, &gv, &[7, 100]).unwrap();
                    sum_squares_into(&grad, &sums, 0).unwrap();
                    clip_scale(&sums, 2.0, &norm_scale).unwrap();
                    let step = LambStep { lr: 1e-2 * t as f32, beta1: 0.9, beta2: 0.999, eps: 1e-6, weight_decay: 0.01, layer_adaptation, t };
                    lamb(&param, &grad, &m, &v, &norm_scale, &norms, 2, &step).unwrap();
                    let norm = gv.iter().map(|g| (*g as f64).powi(2)).sum::<f64>().sqrt();
                    let scale = (2.0 / (norm + 1e-6)).min(1.0) as f32;
                    lamb_reference(&mut pv, &gv, &mut mv, &mut vv, scale, &step);
                    let label = format!("adaptation {layer_adaptation}, step {t} on {device}");
                    assert_close(&format!("param, {label}"), &block_on(param.to_vec::<f32>()).unwrap(), &pv, 1e-6, 1e-5);
                    assert_close(&format!("m, {label}"), &block_on(m.to_vec::<f32>()).unwrap(), &mv, 1e-7, 1e-5);
                    assert_close(&format!("v, {label}"), &block_on(v.to_vec::<f32>()).unwrap(), &vv, 1e-9, 1e-5);
                }
            }
        }
        // A step of the reference moves each weight by lr·‖param‖/‖u‖·u: the whole tensor's
        // step has norm lr·‖param‖ under the adaptation.
        let mut p = vec![3.0f32, 4.0];
        let before = p.clone();
        let step = LambStep { lr: 0.1, beta1: 0.9, beta2: 0.999, eps: 1e-6, weight_decay: 0.0, layer_adaptation: true, t: 1 };
        lamb_reference(&mut p, &[1.0, -2.0], &mut [0.0; 2], &mut [0.0; 2], 1.0, &step);
        let moved = p.iter().zip(&before).map(|(a, b)| ((a - b) as f64).powi(2)).sum::<f64>().sqrt();
        assert!((moved - 0.5).abs() < 1e-6, "{moved}");
    }

    #[test]
    fn bad_lamb_operands_are_errors() {
        for gpu in devices() {
            let device = &gpu.adapter_info().name;
            let t = |shape: &[usize]| Tensor::zeros(gpu, shape, DType::F32).unwrap();
            let step = LambStep { lr: 0.1, beta1: 0.9, beta2: 0.999, eps: 1e-6, weight_decay: 0.0, layer_adaptation: true, t: 1 };
            assert!(lamb(&t(&[4]), &t(&[5]), &t(&[4]), &t(&[4]), &t(&[2]), &t(&[2]), 0, &step).is_err(), "mismatched grad on {device}");
            let err = lamb(&t(&[4]), &t(&[4]), &t(&[4]), &t(&[4]), &t(&[2]), &t(&[2]), 1, &step).unwrap_err().to_string();
            assert!(err.contains("outside norms"), "{err} on {device}");
        }
    }
}
