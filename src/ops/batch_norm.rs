//! BatchNorm1d (`shaders/batch_norm.wgsl`), as ULMFiT's classifier head trains it: over the
//! rows of x [N, C] (a batch of pooled features), normalized with the batch's statistics in
//! training — the running statistics then move by `momentum` towards them, the variance
//! unbiased, as PyTorch's — and with the running ones at evaluation.

use super::{as_u32, expect_f32, expect_shape};
use crate::error::{arg_err, Result};
use crate::kernels::batch_norm::{Params, BACKWARD, EVAL, RUNNING, TRAIN};
use crate::tensor::{DType, Tensor};

/// PyTorch's defaults.
pub const EPS: f32 = 1e-5;
pub const MOMENTUM: f32 = 0.1;

/// The affine parameters and running statistics of one BatchNorm1d, each `[C]`.
#[derive(Clone, Copy)]
pub struct BatchNorm<'a> {
    pub weight: &'a Tensor,
    pub bias: &'a Tensor,
    pub running_mean: &'a Tensor,
    pub running_var: &'a Tensor,
}

/// A training forward, kept for the backward.
pub struct BatchNormSaved {
    /// [3, C]: the batch's mean, biased variance and 1/√(var + eps).
    stats: Tensor,
}

fn params(op: &'static str, x: &Tensor, bn: &BatchNorm) -> Result<Params> {
    expect_f32(op, "x", x, 2)?;
    let (rows, cols) = (x.shape()[0], x.shape()[1]);
    for (what, t) in [("weight", bn.weight), ("bias", bn.bias), ("running_mean", bn.running_mean), ("running_var", bn.running_var)] {
        expect_f32(op, what, t, 1)?;
        expect_shape(op, what, t, &[cols])?;
    }
    if rows == 0 || cols == 0 {
        return Err(arg_err!(op, "an empty batch {:?}", x.shape()));
    }
    Ok(Params { rows: as_u32(op, "N", rows)?, cols: as_u32(op, "C", cols)?, eps: EPS, momentum: MOMENTUM })
}

fn grid(cols: u32) -> [u32; 3] {
    [cols.div_ceil(64), 1, 1]
}

/// Training: y [N, C] normalized with the batch's statistics; `bn`'s running statistics are
/// updated in place. A batch of one row has no variance to normalize with (PyTorch refuses it).
pub fn batch_norm_train(x: &Tensor, bn: &BatchNorm) -> Result<(Tensor, BatchNormSaved)> {
    let op = "batch_norm_train";
    let p = params(op, x, bn)?;
    if p.rows < 2 {
        return Err(arg_err!(op, "batch normalization in training needs more than one row per batch"));
    }
    let gpu = x.gpu();
    let y = Tensor::empty(gpu, x.shape(), DType::F32)?;
    let stats = Tensor::empty(gpu, &[3, p.cols as usize], DType::F32)?;
    gpu.dispatch(&TRAIN, &[], &p, &[x.into(), bn.weight.into(), bn.bias.into(), (&y).into(), (&stats).into()], grid(p.cols))?;
    gpu.dispatch(&RUNNING, &[], &p, &[(&stats).into(), bn.running_mean.into(), bn.running_var.into()], grid(p.cols))?;
    Ok((y, BatchNormSaved { stats }))
}

/// Evaluation: y [N, C] normalized with the running statistics.
pub fn batch_norm_eval(x: &Tensor, bn: &BatchNorm) -> Result<Tensor> {
    let p = params("batch_norm_eval", x, bn)?;
    let gpu = x.gpu();
    let y = Tensor::empty(gpu, x.shape(), DType::F32)?;
    let bindings = [x.into(), bn.weight.into(), bn.bias.into(), bn.running_mean.into(), bn.running_var.into(), (&y).into()];
    gpu.dispatch(&EVAL, &[], &p, &bindings, grid(p.cols))?;
    Ok(y)
}

/// The backward of [`batch_norm_train`]: adds dγ, dβ into `d_weight`, `d_bias` and returns dx.
pub fn batch_norm_backward(x: &Tensor, bn: &BatchNorm, saved: &BatchNormSaved, dy: &Tensor, d_weight: &Tensor, d_bias: &Tensor) -> Result<Tensor> {
    let op = "batch_norm_backward";
    let p = params(op, x, bn)?;
    expect_shape(op, "dy", dy, x.shape())?;
    for (what, t) in [("d_weight", d_weight), ("d_bias", d_bias)] {
        expect_shape(op, what, t, bn.weight.shape())?;
    }
    let gpu = x.gpu();
    let dx = Tensor::empty(gpu, x.shape(), DType::F32)?;
    let bindings = [x.into(), bn.weight.into(), (&saved.stats).into(), dy.into(), (&dx).into(), d_weight.into(), d_bias.into()];
    gpu.dispatch(&BACKWARD, &[], &p, &bindings, grid(p.cols))?;
    Ok(dx)
}

#[cfg(test)]
/// CPU reference of [`batch_norm_train`]'s y, in f64, and the running statistics after it:
/// (y, running_mean, running_var).
pub(crate) fn batch_norm_train_reference(x: &[f32], cols: usize, weight: &[f32], bias: &[f32], running: (&[f32], &[f32])) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let rows = x.len() / cols;
    let n = rows as f64;
    let mut y = vec![0f32; x.len()];
    let (mut mean_out, mut var_out) = (Vec::with_capacity(cols), Vec::with_capacity(cols));
    for c in 0..cols {
        let column: Vec<f64> = (0..rows).map(|r| x[r * cols + c] as f64).collect();
        let mean = column.iter().sum::<f64>() / n;
        let variance = column.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
        for (r, v) in column.iter().enumerate() {
            y[r * cols + c] = ((v - mean) / (variance + EPS as f64).sqrt() * weight[c] as f64 + bias[c] as f64) as f32;
        }
        let m = MOMENTUM as f64;
        mean_out.push(((1.0 - m) * running.0[c] as f64 + m * mean) as f32);
        var_out.push(((1.0 - m) * running.1[c] as f64 + m * variance * n / (n - 1.0)) as f32);
    }
    (y, mean_out, var_out)
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::gpu::testing::devices;
    use crate::ops::testing::{assert_close, numeric_gradient, random_vec, rng};
    use pollster::block_on;

    #[test]
    fn training_evaluation_and_backward_match_the_reference() {
        // Columns past one workgroup of 64.
        for (rows, cols) in [(4, 3), (5, 70)] {
            let mut r = rng(rows as u64);
            let (x, weight, bias, dy) =
                (random_vec(&mut r, rows * cols, 2.0), random_vec(&mut r, cols, 1.0), random_vec(&mut r, cols, 1.0), random_vec(&mut r, rows * cols, 1.0));
            let (mean0, var0): (Vec<f32>, Vec<f32>) = (random_vec(&mut r, cols, 0.5), random_vec(&mut r, cols, 0.3).iter().map(|v| 1.0 + v).collect());
            let (want_y, want_mean, want_var) = batch_norm_train_reference(&x, cols, &weight, &bias, (&mean0, &var0));
            // The gradients of Σ dy·y by finite differences of the reference (small shapes only).
            let loss = |x: &[f32], w: &[f32], b: &[f32]| {
                batch_norm_train_reference(x, cols, w, b, (&mean0, &var0)).0.iter().zip(&dy).map(|(&y, &d)| y as f64 * d as f64).sum::<f64>()
            };
            let numeric = (cols < 10).then(|| {
                (
                    numeric_gradient(&x, 1e-3, |v| loss(v, &weight, &bias)),
                    numeric_gradient(&weight, 1e-3, |v| loss(&x, v, &bias)),
                    numeric_gradient(&bias, 1e-3, |v| loss(&x, &weight, v)),
                )
            });
            for gpu in devices() {
                let name = format!("batch norm {rows}×{cols} on {}", gpu.adapter_info().name);
                let up = |v: &[f32], shape: &[usize]| Tensor::from_slice(gpu, v, shape).unwrap();
                let (w, b, rm, rv) = (up(&weight, &[cols]), up(&bias, &[cols]), up(&mean0, &[cols]), up(&var0, &[cols]));
                let bn = BatchNorm { weight: &w, bias: &b, running_mean: &rm, running_var: &rv };
                let xt = up(&x, &[rows, cols]);
                let (y, saved) = batch_norm_train(&xt, &bn).unwrap();
                let get = |t: &Tensor| block_on(t.to_vec::<f32>()).unwrap();
                assert_close(&format!("{name} y"), &get(&y), &want_y, 1e-5, 1e-5);
                assert_close(&format!("{name} running mean"), &get(&rm), &want_mean, 1e-6, 1e-6);
                assert_close(&format!("{name} running var"), &get(&rv), &want_var, 1e-6, 1e-6);
                // Evaluation with the running statistics: the reference with mean and variance fixed.
                let want_eval: Vec<f32> = (0..rows * cols)
                    .map(|i| {
                        let c = i % cols;
                        ((x[i] - want_mean[c]) as f64 / (want_var[c] as f64 + EPS as f64).sqrt() * weight[c] as f64 + bias[c] as f64) as f32
                    })
                    .collect();
                assert_close(&format!("{name} eval"), &get(&batch_norm_eval(&xt, &bn).unwrap()), &want_eval, 1e-5, 1e-5);
                let (dw, db) = (up(&vec![0.5; cols], &[cols]), up(&vec![0.5; cols], &[cols]));
                let dx = batch_norm_backward(&xt, &bn, &saved, &up(&dy, &[rows, cols]), &dw, &db).unwrap();
                if let Some((dx_want, dw_want, db_want)) = &numeric {
                    let minus_start = |t: &Tensor| get(t).iter().map(|v| v - 0.5).collect::<Vec<_>>();
                    assert_close(&format!("{name} dx vs finite differences"), &get(&dx), dx_want, 1e-3, 1e-3);
                    assert_close(&format!("{name} dγ (accumulated)"), &minus_start(&dw), dw_want, 1e-3, 1e-3);
                    assert_close(&format!("{name} dβ (accumulated)"), &minus_start(&db), db_want, 1e-3, 1e-3);
                }
                // Each column's dx sums to 0 (the mean is subtracted).
                let dx = get(&dx);
                for c in 0..cols {
                    let sum: f32 = (0..rows).map(|r| dx[r * cols + c]).sum();
                    assert!(sum.abs() < 1e-4, "{name}: column {c}'s dx sums to {sum}");
                }
            }
        }
    }

    #[test]
    fn bad_shapes_and_single_rows_are_errors() {
        for gpu in devices() {
            let z = |shape: &[usize]| Tensor::zeros(gpu, shape, DType::F32).unwrap();
            let (w, b, rm, rv) = (z(&[3]), z(&[3]), z(&[3]), z(&[3]));
            let bn = BatchNorm { weight: &w, bias: &b, running_mean: &rm, running_var: &rv };
            assert!(batch_norm_train(&z(&[2, 3]), &bn).is_ok());
            assert!(batch_norm_train(&z(&[1, 3]), &bn).is_err(), "one row");
            assert!(batch_norm_train(&z(&[2, 4]), &bn).is_err(), "4 features for 3");
            assert!(batch_norm_eval(&z(&[1, 3]), &bn).is_ok(), "evaluation takes one row");
        }
    }
}
