//! Layer normalization over the last dimension (`shaders/layer_norm.wgsl`), as in BERT
//! (eps 1e-12) and GPT-2 (eps 1e-5). x is `[..., C]` (rows = product of the leading dims),
//! gamma and beta are `[C]`; besides y the kernel saves the per-row mean and 1/σ that
//! [`layer_norm_backward`] (`shaders/layer_norm_backward.wgsl`) uses.

use super::{as_u32, expect_dtype, expect_f32, expect_shape, grid_1d};
use crate::error::{arg_err, shape_err, Result};
use crate::kernels::layer_norm::{Params, BACKWARD, KERNEL, PARAM_GRADS};
use crate::tensor::{DType, Tensor};

/// Outputs of [`layer_norm`].
#[derive(Clone, Debug)]
pub struct LayerNormOutput {
    /// Normalized, scaled and shifted x; same shape as x.
    pub y: Tensor,
    /// Mean of each row: x's leading shape (`[rows]` for a 2-D x).
    pub mean: Tensor,
    /// 1/√(variance + eps) of each row (biased variance, as PyTorch); shape as `mean`.
    pub rstd: Tensor,
}

/// y = (x − mean)·rstd·gamma + beta over the last dimension of x.
pub fn layer_norm(x: &Tensor, gamma: &Tensor, beta: &Tensor, eps: f32) -> Result<LayerNormOutput> {
    let op = "layer_norm";
    expect_dtype(op, "x", x, DType::F32)?;
    if x.rank() == 0 || x.numel() == 0 {
        return Err(shape_err!(op, "`x` must have rank ≥ 1 and no zero-sized dimension, got shape {:?}", x.shape()));
    }
    let (lead, cols) = x.shape().split_at(x.rank() - 1);
    let cols = cols[0];
    let rows = x.numel() / cols;
    expect_f32(op, "gamma", gamma, 1)?;
    expect_f32(op, "beta", beta, 1)?;
    expect_shape(op, "gamma", gamma, &[cols])?;
    expect_shape(op, "beta", beta, &[cols])?;
    if !(eps >= 0.0 && eps.is_finite()) {
        return Err(arg_err!(op, "eps must be finite and ≥ 0, got {eps}"));
    }
    let gpu = x.gpu();
    let y = Tensor::empty(gpu, x.shape(), DType::F32)?;
    let mean = Tensor::empty(gpu, lead, DType::F32)?;
    let rstd = Tensor::empty(gpu, lead, DType::F32)?;
    let params = Params { rows: as_u32(op, "rows", rows)?, cols: as_u32(op, "C", cols)?, eps, _pad: 0 };
    let bindings = [x.into(), gamma.into(), beta.into(), (&y).into(), (&mean).into(), (&rstd).into()];
    gpu.dispatch(&KERNEL, &[], &params, &bindings, grid_1d(gpu, rows, 1))?;
    Ok(LayerNormOutput { y, mean, rstd })
}

/// The backward of [`layer_norm`]: returns dx and adds Σ dy·x̂ to `dgamma` and Σ dy to
/// `dbeta` (both `[C]`). `forward` is what the forward pass returned for this x.
pub fn layer_norm_backward(x: &Tensor, gamma: &Tensor, forward: &LayerNormOutput, dy: &Tensor, dgamma: &Tensor, dbeta: &Tensor) -> Result<Tensor> {
    let op = "layer_norm_backward";
    expect_dtype(op, "x", x, DType::F32)?;
    expect_shape(op, "dy", dy, x.shape())?;
    expect_dtype(op, "dy", dy, DType::F32)?;
    let cols = gamma.numel();
    for (name, t) in [("dgamma", dgamma), ("dbeta", dbeta)] {
        expect_f32(op, name, t, 1)?;
        expect_shape(op, name, t, &[cols])?;
    }
    if x.shape().last() != Some(&cols) || forward.mean.numel() * cols != x.numel() {
        return Err(shape_err!(op, "x {:?} does not match gamma [{cols}] and the saved mean {:?}", x.shape(), forward.mean.shape()));
    }
    let rows = x.numel() / cols;
    let gpu = x.gpu();
    let dx = Tensor::empty(gpu, x.shape(), DType::F32)?;
    let params = Params { rows: as_u32(op, "rows", rows)?, cols: as_u32(op, "C", cols)?, eps: 0.0, _pad: 0 };
    let (mean, rstd) = (&forward.mean, &forward.rstd);
    gpu.dispatch(&BACKWARD, &[], &params, &[x.into(), gamma.into(), mean.into(), rstd.into(), dy.into(), (&dx).into()], grid_1d(gpu, rows, 1))?;
    let bindings = [x.into(), gamma.into(), mean.into(), rstd.into(), dy.into(), dgamma.into(), dbeta.into()];
    gpu.dispatch(&PARAM_GRADS, &[], &params, &bindings, [as_u32(op, "workgroups", cols.div_ceil(256))?, 1, 1])?;
    Ok(dx)
}

#[cfg(test)]
/// CPU reference of [`layer_norm_backward`] in f64: (dx, dgamma, dbeta) for x [rows, C].
pub(crate) fn layer_norm_backward_reference(x: &[f32], gamma: &[f32], dy: &[f32], eps: f32) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let cols = gamma.len();
    let (_, means, rstds) = layer_norm_reference(x, gamma, &vec![0.0; cols], eps);
    let (mut dx, mut dgamma, mut dbeta) = (Vec::with_capacity(x.len()), vec![0f64; cols], vec![0f64; cols]);
    for ((row, dy_row), (&mean, &rstd)) in x.chunks(cols).zip(dy.chunks(cols)).zip(means.iter().zip(&rstds)) {
        let xhat: Vec<f64> = row.iter().map(|&v| (v as f64 - mean as f64) * rstd as f64).collect();
        let g: Vec<f64> = dy_row.iter().zip(gamma).map(|(&d, &w)| d as f64 * w as f64).collect();
        let mean_g = g.iter().sum::<f64>() / cols as f64;
        let mean_gx = g.iter().zip(&xhat).map(|(a, b)| a * b).sum::<f64>() / cols as f64;
        for c in 0..cols {
            dx.push((rstd as f64 * (g[c] - mean_g - xhat[c] * mean_gx)) as f32);
            dgamma[c] += dy_row[c] as f64 * xhat[c];
            dbeta[c] += dy_row[c] as f64;
        }
    }
    (dx, dgamma.into_iter().map(|v| v as f32).collect(), dbeta.into_iter().map(|v| v as f32).collect())
}

#[cfg(test)]
/// CPU reference of [`layer_norm`] in f64: (y, mean, rstd) for x [rows, gamma.len()].
pub(crate) fn layer_norm_reference(x: &[f32], gamma: &[f32], beta: &[f32], eps: f32) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let cols = gamma.len();
    let (mut y, mut means, mut rstds) = (Vec::with_capacity(x.len()), Vec::new(), Vec::new());
    for row in x.chunks(cols) {
        let mut sum = 0f64;
        for &v in row {
            sum += v as f64;
        }
        let mean = sum / cols as f64;
        let mut var = 0f64;
        for &v in row {
            var += (v as f64 - mean).powi(2);
        }
        let rstd = 1.0 / (var / cols as f64 + eps as f64).sqrt();
        for c in 0..cols {
            y.push(((row[c] as f64 - mean) * rstd * gamma[c] as f64 + beta[c] as f64) as f32);
        }
        means.push(mean as f32);
        rstds.push(rstd as f32);
    }
    (y, means, rstds)
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::gpu::testing::every_device;
    use crate::ops::testing::{assert_close, numeric_gradient, random_vec, rng};
    use pollster::block_on;

    // Tolerance: 1e-5 absolute + relative on y, mean and rstd (f32 tree sums of ≤ 1000 terms;
    // the shifted two-pass variance keeps rows with a large mean accurate too).
    const TOL: f32 = 1e-5;

    fn check(shape: &[usize], eps: f32, offset: f32, seed: u64) {
        let mut rng = rng(seed);
        let cols = *shape.last().unwrap();
        let mut xv = random_vec(&mut rng, shape.iter().product(), 2.0);
        // The last row sits at `offset` with noise of ±0.05: cancellation-prone.
        let start = xv.len() - cols;
        for v in &mut xv[start..] {
            *v = offset + *v * 0.025;
        }
        let gv = random_vec(&mut rng, cols, 1.5);
        let bv = random_vec(&mut rng, cols, 0.5);
        for gpu in every_device() {
            let x = Tensor::from_slice(gpu, &xv, shape).unwrap();
            let gamma = Tensor::from_slice(gpu, &gv, &[cols]).unwrap();
            let beta = Tensor::from_slice(gpu, &bv, &[cols]).unwrap();
            let out = layer_norm(&x, &gamma, &beta, eps).unwrap();
            assert_eq!(out.y.shape(), shape);
            assert_eq!(out.mean.shape(), &shape[..shape.len() - 1]);
            let (y, mean, rstd) = layer_norm_reference(&xv, &gv, &bv, eps);
            let name = format!("layer_norm {shape:?} eps {eps:e} offset {offset} on {}", gpu.adapter_info().name);
            assert_close(&format!("{name} y"), &block_on(out.y.to_vec::<f32>()).unwrap(), &y, TOL, TOL);
            assert_close(&format!("{name} mean"), &block_on(out.mean.to_vec::<f32>()).unwrap(), &mean, TOL, TOL);
            assert_close(&format!("{name} rstd"), &block_on(out.rstd.to_vec::<f32>()).unwrap(), &rstd, TOL, TOL);
        }
    }

    #[test]
    fn layer_norm_matches_reference() {
        let mut seed = 0;
        for rows in [1, 7, 300] {
            for cols in [1, 5, 768, 1000] {
                seed += 1;
                check(&[rows, cols], 1e-5, 0.0, seed);
            }
        }
        // Other ranks, BERT's eps, and a row with mean 1000.
        check(&[2, 3, 257], 1e-12, 0.0, 20);
        check(&[33], 1e-5, 0.0, 21);
        check(&[7, 768], 1e-12, 1000.0, 22);
        check(&[1, 1000], 1e-5, 1000.0, 23);
    }

    /// Σ w·y: a scalar whose gradient with respect to y is w (the upstream gradient).
    fn weighted_sum(y: &[f32], w: &[f32]) -> f64 {
        y.iter().zip(w).map(|(&a, &b)| a as f64 * b as f64).sum()
    }

    #[test]
    fn backward_reference_matches_finite_differences() {
        let mut rng = rng(30);
        let (rows, cols, eps) = (3, 6, 1e-5);
        let (xv, gv, bv, dyv) =
            (random_vec(&mut rng, rows * cols, 2.0), random_vec(&mut rng, cols, 1.5), random_vec(&mut rng, cols, 0.5), random_vec(&mut rng, rows * cols, 1.0));
        let (dx, dgamma, dbeta) = layer_norm_backward_reference(&xv, &gv, &dyv, eps);
        let h = 1e-3;
        let num_dx = numeric_gradient(&xv, h, |x| weighted_sum(&layer_norm_reference(x, &gv, &bv, eps).0, &dyv));
        let num_dgamma = numeric_gradient(&gv, h, |g| weighted_sum(&layer_norm_reference(&xv, g, &bv, eps).0, &dyv));
        let num_dbeta = numeric_gradient(&bv, h, |b| weighted_sum(&layer_norm_reference(&xv, &gv, b, eps).0, &dyv));
        assert_close("dx vs finite differences", &dx, &num_dx, 1e-3, 1e-3);
        assert_close("dgamma vs finite differences", &dgamma, &num_dgamma, 1e-3, 1e-3);
        assert_close("dbeta vs finite differences", &dbeta, &num_dbeta, 1e-3, 1e-3);
    }

    #[test]
    fn backward_matches_reference_and_accumulates() {
        for gpu in every_device() {
            let mut rng = rng(31);
            for (shape, eps) in [(vec![1, 1], 1e-5), (vec![7, 300], 1e-5), (vec![2, 3, 768], 1e-12), (vec![300, 5], 1e-5)] {
                let cols = *shape.last().unwrap();
                let n: usize = shape.iter().product();
                let (xv, gv, dyv) = (random_vec(&mut rng, n, 2.0), random_vec(&mut rng, cols, 1.5), random_vec(&mut rng, n, 1.0));
                let (dg0, db0) = (random_vec(&mut rng, cols, 1.0), random_vec(&mut rng, cols, 1.0));
                let x = Tensor::from_slice(gpu, &xv, &shape).unwrap();
                let gamma = Tensor::from_slice(gpu, &gv, &[cols]).unwrap();
                let beta = Tensor::zeros(gpu, &[cols], DType::F32).unwrap();
                let dy = Tensor::from_slice(gpu, &dyv, &shape).unwrap();
                let dgamma = Tensor::from_slice(gpu, &dg0, &[cols]).unwrap();
                let dbeta = Tensor::from_slice(gpu, &db0, &[cols]).unwrap();
                let forward = layer_norm(&x, &gamma, &beta, eps).unwrap();
                let dx = layer_norm_backward(&x, &gamma, &forward, &dy, &dgamma, &dbeta).unwrap();
                let (want_dx, want_dg, want_db) = layer_norm_backward_reference(&xv, &gv, &dyv, eps);
                let plus = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x + y).collect::<Vec<f32>>();
                let name = format!("layer_norm backward {shape:?} on {}", gpu.adapter_info().name);
                // Sums over up to 300 rows: 1e-4.
                assert_close(&format!("{name} dx"), &block_on(dx.to_vec::<f32>()).unwrap(), &want_dx, 1e-4, 1e-4);
                assert_close(&format!("{name} dgamma"), &block_on(dgamma.to_vec::<f32>()).unwrap(), &plus(&dg0, &want_dg), 1e-4, 1e-4);
                assert_close(&format!("{name} dbeta"), &block_on(dbeta.to_vec::<f32>()).unwrap(), &plus(&db0, &want_db), 1e-4, 1e-4);
            }
        }
    }

    #[test]
    fn bad_operands_are_errors() {
        for gpu in every_device() {
            let x = Tensor::zeros(gpu, &[4, 6], DType::F32).unwrap();
            let g = Tensor::zeros(gpu, &[5], DType::F32).unwrap();
            let err = layer_norm(&x, &g, &g, 1e-5).unwrap_err().to_string();
            assert!(err.contains("layer_norm") && err.contains("[6]") && err.contains("[5]"), "{err}");
            let g6 = Tensor::zeros(gpu, &[6], DType::F32).unwrap();
            let ids = Tensor::zeros(gpu, &[4, 6], DType::U32).unwrap();
            assert!(layer_norm(&ids, &g6, &g6, 1e-5).unwrap_err().to_string().contains("u32"));
            assert!(layer_norm(&x, &g6, &g6, -1.0).unwrap_err().to_string().contains("layer_norm"));
            let empty = Tensor::zeros(gpu, &[0, 6], DType::F32).unwrap();
            assert!(layer_norm(&empty, &g6, &g6, 1e-5).is_err());
        }
    }
}
