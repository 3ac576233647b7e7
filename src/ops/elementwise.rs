//! Element-wise ops (`shaders/elementwise.wgsl`): activations and their backward, scaling,
//! and add / mul with broadcasting of a trailing block (a bias row over every token).

use super::{as_u32, expect_dtype, expect_shape, grid_1d};
use crate::error::{shape_err, Result};
use crate::kernels::elementwise::{Params, BINARY, UNARY, UNARY_BACKWARD};
use crate::tensor::{DType, Tensor};

/// A function applied to every element.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Unary {
    /// x·Φ(x) with the exact normal CDF (BERT's `gelu`).
    GeluErf,
    /// The tanh approximation of GELU (GPT-2's `gelu_new`).
    GeluTanh,
    Tanh,
    Sigmoid,
    Relu,
    /// x·s.
    Scale(f32),
}

impl Unary {
    fn code(self) -> (u32, f32) {
        match self {
            Unary::GeluErf => (0, 0.0),
            Unary::GeluTanh => (1, 0.0),
            Unary::Tanh => (2, 0.0),
            Unary::Sigmoid => (3, 0.0),
            Unary::Relu => (4, 0.0),
            Unary::Scale(s) => (5, s),
        }
    }

    /// The CPU reference of the function.
    #[cfg(test)]
    pub(crate) fn reference(self, x: f32) -> f32 {
        let x64 = x as f64;
        let y = match self {
            Unary::GeluErf => 0.5 * x64 * (1.0 + libm::erf(x64 / std::f64::consts::SQRT_2)),
            Unary::GeluTanh => 0.5 * x64 * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x64 + 0.044715 * x64.powi(3))).tanh()),
            Unary::Tanh => x64.tanh(),
            Unary::Sigmoid => 1.0 / (1.0 + (-x64).exp()),
            Unary::Relu => x64.max(0.0),
            Unary::Scale(s) => x64 * s as f64,
        };
        y as f32
    }

    #[cfg(test)]
    /// The CPU reference of the derivative f'(x).
    pub(crate) fn derivative_reference(self, x: f32) -> f32 {
        let x64 = x as f64;
        let d = match self {
            Unary::GeluErf => {
                let pdf = (-0.5 * x64 * x64).exp() / (2.0 * std::f64::consts::PI).sqrt();
                0.5 * (1.0 + libm::erf(x64 / std::f64::consts::SQRT_2)) + x64 * pdf
            }
            Unary::GeluTanh => {
                let k = (2.0 / std::f64::consts::PI).sqrt();
                let t = (k * (x64 + 0.044715 * x64.powi(3))).tanh();
                0.5 * (1.0 + t) + 0.5 * x64 * (1.0 - t * t) * k * (1.0 + 3.0 * 0.044715 * x64 * x64)
            }
            Unary::Tanh => 1.0 - x64.tanh().powi(2),
            Unary::Sigmoid => {
                let s = 1.0 / (1.0 + (-x64).exp());
                s * (1.0 - s)
            }
            Unary::Relu => (x64 > 0.0) as u32 as f64,
            Unary::Scale(s) => s as f64,
        };
        d as f32
    }
}

/// y = f(x), elementwise.
pub fn unary(x: &Tensor, f: Unary) -> Result<Tensor> {
    let op = "unary";
    expect_dtype(op, "x", x, DType::F32)?;
    let gpu = x.gpu();
    let y = Tensor::empty(gpu, x.shape(), DType::F32)?;
    if x.numel() == 0 {
        return Ok(y);
    }
    let (code, scalar) = f.code();
    let params = Params { n: as_u32(op, "elements", x.numel())?, b_len: 1, op: code, scalar };
    gpu.dispatch(&UNARY, &[], &params, &[x.into(), None.into(), (&y).into()], grid_1d(gpu, x.numel(), 256))?;
    Ok(y)
}

/// dx = dy·f'(x): the backward of [`unary`].
pub fn unary_backward(x: &Tensor, dy: &Tensor, f: Unary) -> Result<Tensor> {
    let op = "unary_backward";
    expect_dtype(op, "x", x, DType::F32)?;
    expect_dtype(op, "dy", dy, DType::F32)?;
    expect_shape(op, "dy", dy, x.shape())?;
    let gpu = x.gpu();
    let dx = Tensor::empty(gpu, x.shape(), DType::F32)?;
    if x.numel() == 0 {
        return Ok(dx);
    }
    let (code, scalar) = f.code();
    let params = Params { n: as_u32(op, "elements", x.numel())?, b_len: 1, op: code, scalar };
    gpu.dispatch(&UNARY_BACKWARD, &[], &params, &[x.into(), dy.into(), (&dx).into()], grid_1d(gpu, x.numel(), 256))?;
    Ok(dx)
}

/// How the right operand of a binary op combines with the left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinaryOp {
    Add,
    Mul,
}

/// a + b, with `b`'s shape a suffix of `a`'s (b is repeated over the leading dimensions).
pub fn add(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    binary(a, b, BinaryOp::Add)
}

/// a · b (elementwise), broadcasting like [`add`].
pub fn mul(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    binary(a, b, BinaryOp::Mul)
}

pub fn binary(a: &Tensor, b: &Tensor, which: BinaryOp) -> Result<Tensor> {
    let op = match which {
        BinaryOp::Add => "add",
        BinaryOp::Mul => "mul",
    };
    expect_dtype(op, "a", a, DType::F32)?;
    expect_dtype(op, "b", b, DType::F32)?;
    if b.rank() > a.rank() || a.shape()[a.rank() - b.rank()..] != *b.shape() {
        return Err(shape_err!(op, "cannot broadcast b {:?} over a {:?} (b's shape must be a suffix of a's)", b.shape(), a.shape()));
    }
    let gpu = a.gpu();
    let y = Tensor::empty(gpu, a.shape(), DType::F32)?;
    if a.numel() == 0 {
        return Ok(y);
    }
    let code = match which {
        BinaryOp::Add => 16,
        BinaryOp::Mul => 17,
    };
    let params = Params { n: as_u32(op, "elements", a.numel())?, b_len: as_u32(op, "elements of b", b.numel())?, op: code, scalar: 0.0 };
    gpu.dispatch(&BINARY, &[], &params, &[a.into(), b.into(), (&y).into()], grid_1d(gpu, a.numel(), 256))?;
    Ok(y)
}

#[cfg(test)]
/// CPU reference of [`binary`].
pub(crate) fn binary_reference(a: &[f32], b: &[f32], which: BinaryOp) -> Vec<f32> {
    a.iter()
        .enumerate()
        .map(|(i, &x)| match which {
            BinaryOp::Add => x + b[i % b.len()],
            BinaryOp::Mul => x * b[i % b.len()],
        })
        .collect()
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::gpu::testing::every_device;
    use crate::ops::testing::{assert_close, numeric_gradient, random_vec, rng};
    use pollster::block_on;

    // Tolerance: 1e-5 absolute + relative (erf approximation error is 1.5e-7, exp/tanh ulps).
    const TOL: f32 = 1e-5;

    #[test]
    fn unary_ops_match_reference() {
        for gpu in every_device() {
            let mut rng = rng(1);
            // Includes large magnitudes: tanh and sigmoid must saturate, not overflow to NaN.
            let mut data = random_vec(&mut rng, 1031, 6.0);
            data.extend([0.0, -0.0, 40.0, -40.0, 100.0, -100.0, 1e-6]);
            let x = Tensor::from_slice(gpu, &data, &[data.len()]).unwrap();
            for f in [Unary::GeluErf, Unary::GeluTanh, Unary::Tanh, Unary::Sigmoid, Unary::Relu, Unary::Scale(-0.125)] {
                let got = block_on(unary(&x, f).unwrap().to_vec::<f32>()).unwrap();
                let want: Vec<f32> = data.iter().map(|&v| f.reference(v)).collect();
                assert_close(&format!("{f:?} on {}", gpu.adapter_info().name), &got, &want, TOL, TOL);
            }
        }
    }

    #[test]
    fn derivative_reference_matches_finite_differences() {
        let mut rng = rng(3);
        let data = random_vec(&mut rng, 200, 4.0);
        for f in [Unary::GeluErf, Unary::GeluTanh, Unary::Tanh, Unary::Sigmoid, Unary::Scale(-0.125)] {
            let analytic: Vec<f32> = data.iter().map(|&v| f.derivative_reference(v)).collect();
            let numeric: Vec<f32> = data.iter().map(|&v| numeric_gradient(&[v], 1e-3, |x| f.reference(x[0]) as f64)[0]).collect();
            assert_close(&format!("{f:?}' vs finite differences"), &analytic, &numeric, 2e-3, 2e-3);
        }
    }

    #[test]
    fn unary_backward_matches_reference() {
        for gpu in every_device() {
            let mut rng = rng(4);
            let mut data = random_vec(&mut rng, 1031, 6.0);
            data.extend([0.0, 40.0, -40.0, 100.0, -100.0, 1e-6]);
            let dyv = random_vec(&mut rng, data.len(), 1.0);
            let x = Tensor::from_slice(gpu, &data, &[data.len()]).unwrap();
            let dy = Tensor::from_slice(gpu, &dyv, &[data.len()]).unwrap();
            for f in [Unary::GeluErf, Unary::GeluTanh, Unary::Tanh, Unary::Sigmoid, Unary::Relu, Unary::Scale(-0.125)] {
                let got = block_on(unary_backward(&x, &dy, f).unwrap().to_vec::<f32>()).unwrap();
                let want: Vec<f32> = data.iter().zip(&dyv).map(|(&v, &g)| g * f.derivative_reference(v)).collect();
                assert_close(&format!("{f:?} backward on {}", gpu.adapter_info().name), &got, &want, TOL, TOL);
            }
        }
    }

    #[test]
    fn binary_ops_broadcast_a_trailing_block() {
        for gpu in every_device() {
            let mut rng = rng(2);
            for (a_shape, b_shape) in
                [(vec![7, 13], vec![13]), (vec![40, 13], vec![13]), (vec![3, 5, 4], vec![5, 4]), (vec![1, 9], vec![1, 9]), (vec![257], vec![257])]
            {
                let av = random_vec(&mut rng, a_shape.iter().product(), 2.0);
                let bv = random_vec(&mut rng, b_shape.iter().product(), 2.0);
                let a = Tensor::from_slice(gpu, &av, &a_shape).unwrap();
                let b = Tensor::from_slice(gpu, &bv, &b_shape).unwrap();
                for which in [BinaryOp::Add, BinaryOp::Mul] {
                    let got = block_on(binary(&a, &b, which).unwrap().to_vec::<f32>()).unwrap();
                    assert_close(
                        &format!("{which:?} {a_shape:?} {b_shape:?} on {}", gpu.adapter_info().name),
                        &got,
                        &binary_reference(&av, &bv, which),
                        TOL,
                        TOL,
                    );
                }
            }
        }
    }

    #[test]
    fn bad_operands_are_errors() {
        for gpu in every_device() {
            let a = Tensor::from_slice(gpu, &[1.0f32; 6], &[2, 3]).unwrap();
            let b = Tensor::from_slice(gpu, &[1.0f32; 2], &[2]).unwrap();
            let err = add(&a, &b).unwrap_err().to_string();
            assert!(err.contains("add") && err.contains("[2]") && err.contains("[2, 3]"), "{err}");
            let ids = Tensor::from_slice(gpu, &[1u32; 6], &[2, 3]).unwrap();
            assert!(unary(&ids, Unary::Relu).unwrap_err().to_string().contains("u32"));
        }
    }
}
