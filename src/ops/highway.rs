//! An AllenNLP `Highway` layer (`shaders/highway.wgsl`), as in ELMo's token encoder:
//! proj = x·Wᵀ + b with W `[2d, d]` and b `[2d]` (one matmul), then a combine kernel
//! out = gate·x + (1 − gate)·f(proj[:, 0:d]) with gate = σ(proj[:, d:2d]); and its backward
//! for training, from the saved proj.

use super::char_cnn::Activation;
use super::matmul::{matmul, matmul_accumulate, Matmul};
use super::sum::column_sums_into;
use super::{as_u32, expect_f32, expect_shape, grid_1d};
use crate::error::{shape_err, Result};
use crate::kernels::highway::{Params, BACKWARD, KERNEL};
use crate::tensor::{DType, Tensor};

/// Invocations per workgroup.
const WG: usize = 256;

/// One highway layer over `x` `[N, d]`: `weight` `[2d, d]` (`layers.{i}.weight`, nonlinear rows
/// first, then gate rows), `bias` `[2d]`. Returns `[N, d]`.
pub fn highway(x: &Tensor, weight: &Tensor, bias: &Tensor, activation: Activation) -> Result<Tensor> {
    Ok(highway_saved(x, weight, bias, activation)?.out)
}

/// A training forward's result: the output and the projection the backward reads.
pub struct HighwayOutput {
    /// [N, d].
    pub out: Tensor,
    /// [N, 2d]: x·Wᵀ + b, nonlinear half then gate half.
    pub proj: Tensor,
}

/// [`highway`], keeping the projection for [`highway_backward`].
pub fn highway_saved(x: &Tensor, weight: &Tensor, bias: &Tensor, activation: Activation) -> Result<HighwayOutput> {
    let op = "highway";
    let (rows, dim) = check(op, x, weight)?;
    expect_f32(op, "bias", bias, 1)?;
    expect_shape(op, "bias", bias, &[2 * dim])?;
    let proj = matmul(x, weight, Matmul { trans_b: true, bias: Some(bias), ..Default::default() })?;
    let gpu = x.gpu();
    let out = Tensor::empty(gpu, &[rows, dim], DType::F32)?;
    let params = Params { rows: rows as u32, dim: dim as u32, activation: activation.code(), _pad: 0 };
    gpu.dispatch(&KERNEL, &[], &params, &[x.into(), (&proj).into(), (&out).into()], grid_1d(gpu, rows * dim, WG))?;
    Ok(HighwayOutput { out, proj })
}

/// Checks x [N, d] and weight [2d, d]; returns (N, d).
fn check(op: &'static str, x: &Tensor, weight: &Tensor) -> Result<(usize, usize)> {
    expect_f32(op, "x", x, 2)?;
    let (rows, dim) = (x.shape()[0], x.shape()[1]);
    expect_f32(op, "weight", weight, 2)?;
    expect_shape(op, "weight", weight, &[2 * dim, dim])?;
    as_u32(op, "elements of the projection", rows * 2 * dim)?;
    Ok((rows, dim))
}

/// Backward of [`highway_saved`] for `d_out` `[N, d]`: adds into `d_weight` `[2d, d]` and
/// `d_bias` `[2d]`, returns dx `[N, d]` = gate·d_out + d_proj·W.
pub fn highway_backward(
    x: &Tensor,
    weight: &Tensor,
    saved: &HighwayOutput,
    d_out: &Tensor,
    activation: Activation,
    d_weight: &Tensor,
    d_bias: &Tensor,
) -> Result<Tensor> {
    let op = "highway_backward";
    let (rows, dim) = check(op, x, weight)?;
    expect_shape(op, "d_out", d_out, x.shape())?;
    expect_f32(op, "d_out", d_out, 2)?;
    expect_shape(op, "d_weight", d_weight, weight.shape())?;
    expect_shape(op, "d_bias", d_bias, &[2 * dim])?;
    if saved.proj.shape() != [rows, 2 * dim] {
        return Err(shape_err!(op, "the saved projection {:?} is not for x {:?}", saved.proj.shape(), x.shape()));
    }
    let gpu = x.gpu();
    let d_proj = Tensor::empty(gpu, &[rows, 2 * dim], DType::F32)?;
    let dx = Tensor::empty(gpu, &[rows, dim], DType::F32)?;
    let params = Params { rows: rows as u32, dim: dim as u32, activation: activation.code(), _pad: 0 };
    let bindings = [x.into(), (&saved.proj).into(), d_out.into(), (&d_proj).into(), (&dx).into()];
    gpu.dispatch(&BACKWARD, &[], &params, &bindings, grid_1d(gpu, rows * dim, WG))?;
    matmul_accumulate(&d_proj, x, Matmul { trans_a: true, ..Default::default() }, d_weight)?;
    column_sums_into(&d_proj, d_bias)?;
    matmul_accumulate(&d_proj, weight, Matmul::default(), &dx)?;
    Ok(dx)
}

#[cfg(test)]
/// CPU reference of [`highway`] on row-major host data: x `[N, d]`, weight `[2d, d]`, bias `[2d]`.
pub(crate) fn highway_reference(x: &[f32], dim: usize, weight: &[f32], bias: &[f32], activation: Activation) -> Vec<f32> {
    let rows = x.len() / dim;
    let mut out = vec![0f32; rows * dim];
    for r in 0..rows {
        let xr = &x[r * dim..][..dim];
        let linear = |o: usize| bias[o] as f64 + (0..dim).map(|k| xr[k] as f64 * weight[o * dim + k] as f64).sum::<f64>();
        for c in 0..dim {
            let nonlinear = activation.reference(linear(c));
            let gate = 1.0 / (1.0 + (-linear(dim + c)).exp());
            out[r * dim + c] = (gate * xr[c] as f64 + (1.0 - gate) * nonlinear) as f32;
        }
    }
    out
}

#[cfg(test)]
/// CPU reference of [`highway_backward`] in f64: (dx, d_weight, d_bias) of Σ d_out·out.
pub(crate) fn highway_backward_reference(
    x: &[f32],
    dim: usize,
    weight: &[f32],
    bias: &[f32],
    activation: Activation,
    d_out: &[f32],
) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let (mut dx, mut d_weight, mut d_bias) = (vec![0f64; x.len()], vec![0f64; weight.len()], vec![0f64; bias.len()]);
    for (r, xr) in x.chunks(dim).enumerate() {
        let linear = |o: usize| bias[o] as f64 + (0..dim).map(|k| xr[k] as f64 * weight[o * dim + k] as f64).sum::<f64>();
        let mut d_proj = vec![0f64; 2 * dim];
        for c in 0..dim {
            let (pre, d) = (linear(c), d_out[r * dim + c] as f64);
            let nonlinear = activation.reference(pre);
            let gate = 1.0 / (1.0 + (-linear(dim + c)).exp());
            let slope = match activation {
                Activation::Tanh => 1.0 - nonlinear * nonlinear,
                Activation::Relu => (pre > 0.0) as u8 as f64,
            };
            d_proj[c] = d * (1.0 - gate) * slope;
            d_proj[dim + c] = d * (xr[c] as f64 - nonlinear) * gate * (1.0 - gate);
            dx[r * dim + c] += d * gate;
        }
        for (o, &d) in d_proj.iter().enumerate() {
            d_bias[o] += d;
            for k in 0..dim {
                d_weight[o * dim + k] += d * xr[k] as f64;
                dx[r * dim + k] += d * weight[o * dim + k] as f64;
            }
        }
    }
    let f32s = |v: Vec<f64>| v.into_iter().map(|x| x as f32).collect();
    (f32s(dx), f32s(d_weight), f32s(d_bias))
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::gpu::testing::devices;
    use crate::ops::testing::{assert_close, numeric_gradient, random_vec, rng};
    use pollster::block_on;

    // Tolerance: 1e-5 absolute + relative (the projection sums ≤ 64 products of values ≤ 1).
    const TOL: f32 = 1e-5;

    #[test]
    fn highway_matches_reference() {
        let mut rng = rng(1);
        for (rows, dim) in [(11, 19), (1, 19), (1, 1), (37, 64)] {
            let xv = random_vec(&mut rng, rows * dim, 2.0);
            let wv = random_vec(&mut rng, 2 * dim * dim, 0.5);
            let bv = random_vec(&mut rng, 2 * dim, 1.0);
            for gpu in devices() {
                let x = Tensor::from_slice(gpu, &xv, &[rows, dim]).unwrap();
                let w = Tensor::from_slice(gpu, &wv, &[2 * dim, dim]).unwrap();
                let b = Tensor::from_slice(gpu, &bv, &[2 * dim]).unwrap();
                for activation in [Activation::Relu, Activation::Tanh] {
                    let got = block_on(highway(&x, &w, &b, activation).unwrap().to_vec::<f32>()).unwrap();
                    let want = highway_reference(&xv, dim, &wv, &bv, activation);
                    assert_close(&format!("highway N{rows} d{dim} {activation:?} on {}", gpu.adapter_info().name), &got, &want, TOL, TOL);
                }
            }
        }
    }

    #[test]
    fn backward_reference_matches_finite_differences() {
        let (rows, dim) = (3, 4);
        let mut rng = rng(2);
        let (x, w, b, d_out) = (
            random_vec(&mut rng, rows * dim, 2.0),
            random_vec(&mut rng, 2 * dim * dim, 0.5),
            random_vec(&mut rng, 2 * dim, 1.0),
            random_vec(&mut rng, rows * dim, 1.0),
        );
        for activation in [Activation::Relu, Activation::Tanh] {
            let loss = |x: &[f32], w: &[f32], b: &[f32]| {
                highway_reference(x, dim, w, b, activation).iter().zip(&d_out).map(|(&o, &d)| o as f64 * d as f64).sum::<f64>()
            };
            let (dx, dw, db) = highway_backward_reference(&x, dim, &w, &b, activation, &d_out);
            let h = 1e-3;
            assert_close(&format!("highway dx {activation:?} vs finite differences"), &dx, &numeric_gradient(&x, h, |v| loss(v, &w, &b)), 1e-3, 1e-3);
            assert_close(&format!("highway dW {activation:?} vs finite differences"), &dw, &numeric_gradient(&w, h, |v| loss(&x, v, &b)), 1e-3, 1e-3);
            assert_close(&format!("highway db {activation:?} vs finite differences"), &db, &numeric_gradient(&b, h, |v| loss(&x, &w, v)), 1e-3, 1e-3);
        }
    }

    #[test]
    fn backward_matches_reference() {
        let mut rng = rng(3);
        for (rows, dim) in [(11, 19), (1, 1), (37, 64)] {
            let (xv, wv, bv, dv) = (
                random_vec(&mut rng, rows * dim, 2.0),
                random_vec(&mut rng, 2 * dim * dim, 0.5),
                random_vec(&mut rng, 2 * dim, 1.0),
                random_vec(&mut rng, rows * dim, 1.0),
            );
            for gpu in devices() {
                let up = |v: &[f32], shape: &[usize]| Tensor::from_slice(gpu, v, shape).unwrap();
                let (x, w, b, d_out) = (up(&xv, &[rows, dim]), up(&wv, &[2 * dim, dim]), up(&bv, &[2 * dim]), up(&dv, &[rows, dim]));
                for activation in [Activation::Relu, Activation::Tanh] {
                    // The gradients start at 1 to show they are added to.
                    let (dw, db) = (up(&vec![1.0; wv.len()], &[2 * dim, dim]), up(&vec![1.0; bv.len()], &[2 * dim]));
                    let saved = highway_saved(&x, &w, &b, activation).unwrap();
                    let dx = highway_backward(&x, &w, &saved, &d_out, activation, &dw, &db).unwrap();
                    let get = |t: &Tensor| block_on(t.to_vec::<f32>()).unwrap();
                    let (want_dx, want_dw, want_db) = highway_backward_reference(&xv, dim, &wv, &bv, activation, &dv);
                    let less_one = |v: Vec<f32>| v.iter().map(|g| g - 1.0).collect::<Vec<_>>();
                    let name = format!("highway backward N{rows} d{dim} {activation:?} on {}", gpu.adapter_info().name);
                    assert_close(&format!("{name} dx"), &get(&dx), &want_dx, TOL, TOL);
                    assert_close(&format!("{name} dW"), &less_one(get(&dw)), &want_dw, 1e-4, 1e-4);
                    assert_close(&format!("{name} db"), &less_one(get(&db)), &want_db, 1e-4, 1e-4);
                }
            }
        }
    }

    #[test]
    fn bad_shapes_are_errors() {
        for gpu in devices() {
            let z = |shape: &[usize]| Tensor::zeros(gpu, shape, DType::F32).unwrap();
            let (x, w, b) = (z(&[3, 4]), z(&[8, 4]), z(&[8]));
            assert!(highway(&x, &w, &b, Activation::Relu).is_ok());
            assert!(highway(&x, &z(&[4, 8]), &b, Activation::Relu).is_err(), "weight transposed");
            assert!(highway(&x, &z(&[4, 4]), &b, Activation::Relu).is_err(), "weight without gate rows");
            assert!(highway(&x, &w, &z(&[4]), Activation::Relu).is_err(), "bias length");
            assert!(highway(&z(&[12]), &w, &b, Activation::Relu).is_err(), "rank 1 x");
            let ids = Tensor::from_slice(gpu, &[0u32; 12], &[3, 4]).unwrap();
            assert!(highway(&ids, &w, &b, Activation::Relu).is_err(), "u32 x");
            let device = &gpu.adapter_info().name;
            let saved = highway_saved(&x, &w, &b, Activation::Relu).unwrap();
            if let Err(e) = highway_backward(&x, &w, &saved, &x, Activation::Relu, &w, &b) {
                panic!("backward on {device}: {e}");
            }
            assert!(highway_backward(&x, &w, &saved, &z(&[2, 4]), Activation::Relu, &w, &b).is_err(), "d_out rows on {device}");
            assert!(highway_backward(&x, &w, &saved, &x, Activation::Relu, &z(&[4, 8]), &b).is_err(), "d_weight shape on {device}");
            assert!(highway_backward(&z(&[2, 4]), &w, &saved, &z(&[2, 4]), Activation::Relu, &w, &b).is_err(), "saved for other rows on {device}");
        }
    }
}
