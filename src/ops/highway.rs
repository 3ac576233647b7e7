//! An AllenNLP `Highway` layer (`shaders/highway.wgsl`), as in ELMo's token encoder:
//! proj = x·Wᵀ + b with W [2d, d] and b [2d] (one matmul), then a combine kernel
//! out = gate·x + (1 − gate)·f(proj[:, 0:d]) with gate = σ(proj[:, d:2d]).

use super::char_cnn::Activation;
use super::matmul::{matmul, Matmul};
use super::{as_u32, expect_f32, expect_shape, grid_1d};
use crate::error::Result;
use crate::gpu::{Access, Kernel};
use crate::tensor::{DType, Tensor};

const KERNEL: Kernel = Kernel {
    shader: "highway",
    source: include_str!("../../shaders/highway.wgsl"),
    entry: "highway",
    bindings: &[Access::Read, Access::Read, Access::ReadWrite],
};

/// Invocations per workgroup.
const WG: usize = 256;

#[repr(C)]
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
struct Params {
    rows: u32,
    dim: u32,
    activation: u32,
    _pad: u32,
}

/// One highway layer over `x` [N, d]: `weight` [2d, d] (`layers.{i}.weight`, nonlinear rows
/// first, then gate rows), `bias` [2d]. Returns [N, d].
pub fn highway(x: &Tensor, weight: &Tensor, bias: &Tensor, activation: Activation) -> Result<Tensor> {
    let op = "highway";
    expect_f32(op, "x", x, 2)?;
    let (rows, dim) = (x.shape()[0], x.shape()[1]);
    expect_f32(op, "weight", weight, 2)?;
    expect_shape(op, "weight", weight, &[2 * dim, dim])?;
    expect_f32(op, "bias", bias, 1)?;
    expect_shape(op, "bias", bias, &[2 * dim])?;
    as_u32(op, "elements of the projection", rows * 2 * dim)?;
    let proj = matmul(x, weight, Matmul { trans_b: true, bias: Some(bias), ..Default::default() })?;
    let gpu = x.gpu();
    let out = Tensor::empty(gpu, &[rows, dim], DType::F32)?;
    let params = Params { rows: rows as u32, dim: dim as u32, activation: activation.code(), _pad: 0 };
    gpu.dispatch(&KERNEL, &[], &params, &[x.into(), (&proj).into(), (&out).into()], grid_1d(gpu, rows * dim, WG))?;
    Ok(out)
}

/// CPU reference of [`highway`] on row-major host data: x [N, d], weight [2d, d], bias [2d].
pub fn highway_reference(x: &[f32], dim: usize, weight: &[f32], bias: &[f32], activation: Activation) -> Vec<f32> {
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

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::gpu::testing::gpu;
    use crate::ops::testing::{assert_close, random_vec, rng};
    use pollster::block_on;

    // Tolerance: 1e-5 absolute + relative (the projection sums ≤ 64 products of values ≤ 1).
    const TOL: f32 = 1e-5;

    #[test]
    fn highway_matches_reference() {
        let gpu = gpu();
        let mut rng = rng(1);
        for (rows, dim) in [(11, 19), (1, 19), (1, 1), (37, 64)] {
            let xv = random_vec(&mut rng, rows * dim, 2.0);
            let wv = random_vec(&mut rng, 2 * dim * dim, 0.5);
            let bv = random_vec(&mut rng, 2 * dim, 1.0);
            let x = Tensor::from_slice(gpu, &xv, &[rows, dim]).unwrap();
            let w = Tensor::from_slice(gpu, &wv, &[2 * dim, dim]).unwrap();
            let b = Tensor::from_slice(gpu, &bv, &[2 * dim]).unwrap();
            for activation in [Activation::Relu, Activation::Tanh] {
                let got = block_on(highway(&x, &w, &b, activation).unwrap().to_vec::<f32>()).unwrap();
                let want = highway_reference(&xv, dim, &wv, &bv, activation);
                assert_close(&format!("highway N{rows} d{dim} {activation:?}"), &got, &want, TOL, TOL);
            }
        }
    }

    #[test]
    fn bad_shapes_are_errors() {
        let gpu = gpu();
        let z = |shape: &[usize]| Tensor::zeros(gpu, shape, DType::F32).unwrap();
        let (x, w, b) = (z(&[3, 4]), z(&[8, 4]), z(&[8]));
        assert!(highway(&x, &w, &b, Activation::Relu).is_ok());
        assert!(highway(&x, &z(&[4, 8]), &b, Activation::Relu).is_err(), "weight transposed");
        assert!(highway(&x, &z(&[4, 4]), &b, Activation::Relu).is_err(), "weight without gate rows");
        assert!(highway(&x, &w, &z(&[4]), Activation::Relu).is_err(), "bias length");
        assert!(highway(&z(&[12]), &w, &b, Activation::Relu).is_err(), "rank 1 x");
        let ids = Tensor::from_slice(gpu, &[0u32; 12], &[3, 4]).unwrap();
        assert!(highway(&ids, &w, &b, Activation::Relu).is_err(), "u32 x");
    }
}
