//! Knowledge distillation's losses (`shaders/distillation.wgsl`), each mean over its rows:
//!
//! - the soft-target loss T²·KL(softmax(t/T) ‖ softmax(s/T)) of student logits s against
//!   teacher logits t at temperature T (Hinton et al. 2015: the T² keeps the gradient's scale
//!   as T changes), PyTorch's `KLDivLoss(reduction="batchmean")(log_softmax(s/T),
//!   softmax(t/T))·T²` as DistilBERT's distiller uses it;
//! - the cosine loss 1 − cos(s, t) between student and teacher hidden states, PyTorch's
//!   `CosineEmbeddingLoss` with target 1.

use super::{as_u32, expect_f32, grid_1d};
use crate::error::{arg_err, shape_err, Result};
use crate::kernels::distillation::{Params, COSINE, MEAN, SOFT_BACKWARD, SOFT_ROWS};
use crate::tensor::{DType, Tensor};

/// What PyTorch's cosine_embedding_loss adds to each squared norm.
#[cfg(test)]
const NORM_EPS: f64 = 1e-12;

/// The output of [`soft_target_loss`], kept for its backward.
#[derive(Debug)]
pub struct SoftTargetOutput {
    /// `[1]`: T² × the mean KL divergence over the rows.
    pub loss: Tensor,
    /// `[N, 2]`: each row's logsumexp of s/T and of t/T.
    logsumexp: Tensor,
    temperature: f32,
}

/// Checks that student and teacher are [N, C] f32 of one shape; returns (N, C) as u32.
fn pair_shape(op: &'static str, student: &Tensor, teacher: &Tensor) -> Result<(u32, u32)> {
    expect_f32(op, "student", student, 2)?;
    expect_f32(op, "teacher", teacher, 2)?;
    if student.shape() != teacher.shape() {
        return Err(shape_err!(op, "student {:?} and teacher {:?} differ in shape", student.shape(), teacher.shape()));
    }
    let (rows, cols) = (student.shape()[0], student.shape()[1]);
    as_u32(op, "rows × columns", rows.checked_mul(cols).ok_or_else(|| shape_err!(op, "{rows} × {cols} overflows"))?)?;
    Ok((as_u32(op, "rows", rows)?, as_u32(op, "columns", cols)?))
}

fn check_temperature(op: &'static str, temperature: f32) -> Result<()> {
    match temperature.is_finite() && temperature > 0.0 {
        true => Ok(()),
        false => Err(arg_err!(op, "the temperature must be a positive number, not {temperature}")),
    }
}

/// The soft-target loss of student logits [N, V] against teacher logits [N, V] at `temperature`.
pub fn soft_target_loss(student: &Tensor, teacher: &Tensor, temperature: f32) -> Result<SoftTargetOutput> {
    let op = "soft_target_loss";
    check_temperature(op, temperature)?;
    let (rows, cols) = pair_shape(op, student, teacher)?;
    let gpu = student.gpu();
    let losses = Tensor::empty(gpu, &[rows as usize], DType::F32)?;
    let logsumexp = Tensor::empty(gpu, &[rows as usize, 2], DType::F32)?;
    let loss = Tensor::empty(gpu, &[1], DType::F32)?;
    let params = Params { rows, cols, inv_temperature: 1.0 / temperature, scale: temperature * temperature };
    let bindings = [student.into(), teacher.into(), (&losses).into(), (&logsumexp).into(), (&loss).into()];
    gpu.dispatch(&SOFT_ROWS, &[], &params, &bindings, grid_1d(gpu, rows as usize, 1))?;
    gpu.dispatch(&MEAN, &[], &params, &bindings, [1, 1, 1])?;
    Ok(SoftTargetOutput { loss, logsumexp, temperature })
}

/// The gradient of `d_loss` × [`soft_target_loss`] with respect to the student logits:
/// d_loss·T/N · (softmax(s/T) − softmax(t/T)).
pub fn soft_target_loss_backward(student: &Tensor, teacher: &Tensor, forward: &SoftTargetOutput, d_loss: f32) -> Result<Tensor> {
    let op = "soft_target_loss_backward";
    let (rows, cols) = pair_shape(op, student, teacher)?;
    if forward.logsumexp.shape()[0] != rows as usize {
        return Err(shape_err!(op, "logits {:?} are not those of the forward pass ({} rows)", student.shape(), forward.logsumexp.shape()[0]));
    }
    let t = forward.temperature;
    let params = Params { rows, cols, inv_temperature: 1.0 / t, scale: d_loss * t / rows as f32 };
    let gpu = student.gpu();
    let grad = Tensor::empty(gpu, student.shape(), DType::F32)?;
    let bindings = [student.into(), teacher.into(), (&forward.logsumexp).into(), (&grad).into()];
    gpu.dispatch(&SOFT_BACKWARD, &[], &params, &bindings, grid_1d(gpu, rows as usize * cols as usize, 256))?;
    Ok(grad)
}

/// The cosine loss of student rows [N, H] against teacher rows [N, H] — the mean of
/// 1 − cos(s, t) — and its gradient with respect to the student rows, scaled by `d_loss`.
pub fn cosine_loss_backward(student: &Tensor, teacher: &Tensor, d_loss: f32) -> Result<(Tensor, Tensor)> {
    let op = "cosine_loss";
    let (rows, cols) = pair_shape(op, student, teacher)?;
    let gpu = student.gpu();
    let losses = Tensor::empty(gpu, &[rows as usize], DType::F32)?;
    let grad = Tensor::empty(gpu, student.shape(), DType::F32)?;
    let loss = Tensor::empty(gpu, &[1], DType::F32)?;
    let params = Params { rows, cols, inv_temperature: 1.0, scale: d_loss / rows as f32 };
    gpu.dispatch(&COSINE, &[], &params, &[student.into(), teacher.into(), (&losses).into(), (&grad).into()], grid_1d(gpu, rows as usize, 1))?;
    let mean = Params { scale: 1.0, ..params };
    gpu.dispatch(&MEAN, &[], &mean, &[student.into(), teacher.into(), (&losses).into(), (&grad).into(), (&loss).into()], [1, 1, 1])?;
    Ok((loss, grad))
}

/// log softmax(row / T) in f64.
#[cfg(test)]
fn log_softmax_reference(row: &[f32], temperature: f64) -> Vec<f64> {
    let scaled: Vec<f64> = row.iter().map(|&v| v as f64 / temperature).collect();
    let max = scaled.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let lse = max + scaled.iter().map(|v| (v - max).exp()).sum::<f64>().ln();
    scaled.iter().map(|v| v - lse).collect()
}

#[cfg(test)]
/// CPU reference of [`soft_target_loss`] in f64, for rows of `cols`.
pub(crate) fn soft_target_loss_reference(student: &[f32], teacher: &[f32], cols: usize, temperature: f32) -> f64 {
    let t = temperature as f64;
    let rows = student.len() / cols;
    let mut total = 0.0;
    for (s, u) in student.chunks(cols).zip(teacher.chunks(cols)) {
        let (log_q, log_p) = (log_softmax_reference(s, t), log_softmax_reference(u, t));
        total += log_p.iter().zip(&log_q).map(|(lp, lq)| lp.exp() * (lp - lq)).sum::<f64>();
    }
    t * t * total / rows as f64
}

#[cfg(test)]
/// CPU reference of [`soft_target_loss_backward`] in f64.
pub(crate) fn soft_target_loss_backward_reference(student: &[f32], teacher: &[f32], cols: usize, temperature: f32, d_loss: f32) -> Vec<f32> {
    let t = temperature as f64;
    let scale = d_loss as f64 * t / (student.len() / cols) as f64;
    let mut grad = Vec::with_capacity(student.len());
    for (s, u) in student.chunks(cols).zip(teacher.chunks(cols)) {
        let (log_q, log_p) = (log_softmax_reference(s, t), log_softmax_reference(u, t));
        grad.extend(log_q.iter().zip(&log_p).map(|(lq, lp)| (scale * (lq.exp() - lp.exp())) as f32));
    }
    grad
}

#[cfg(test)]
/// CPU reference of [`cosine_loss_backward`] in f64: (the mean loss, the gradient).
pub(crate) fn cosine_loss_reference(student: &[f32], teacher: &[f32], cols: usize, d_loss: f32) -> (f64, Vec<f32>) {
    let rows = student.len() / cols;
    let scale = d_loss as f64 / rows as f64;
    let (mut total, mut grad) = (0.0, Vec::with_capacity(student.len()));
    for (s, u) in student.chunks(cols).zip(teacher.chunks(cols)) {
        let dot: f64 = s.iter().zip(u).map(|(&a, &b)| a as f64 * b as f64).sum();
        let m1 = s.iter().map(|&a| a as f64 * a as f64).sum::<f64>() + NORM_EPS;
        let m2 = u.iter().map(|&b| b as f64 * b as f64).sum::<f64>() + NORM_EPS;
        let denom = (m1 * m2).sqrt();
        let cos = dot / denom;
        total += 1.0 - cos;
        grad.extend(s.iter().zip(u).map(|(&a, &b)| (-scale * (b as f64 / denom - cos * a as f64 / m1)) as f32));
    }
    (total / rows as f64, grad)
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::gpu::testing::devices;
    use crate::gpu::Device;
    use crate::ops::testing::{assert_close, numeric_gradient, random_vec, rng};
    use pollster::block_on;

    fn upload(gpu: &Device, v: &[f32], rows: usize, cols: usize) -> Tensor {
        Tensor::from_slice(gpu, v, &[rows, cols]).unwrap()
    }

    #[test]
    fn soft_target_loss_and_its_backward_match_the_reference() {
        let mut rng = rng(1);
        for (rows, cols, temperature, offset) in [(1, 1, 1.0, 0.0), (5, 7, 2.0, 0.0), (3, 1000, 4.0, 500.0), (2, 50257, 1.0, 0.0), (300, 30, 0.5, -300.0)] {
            let mut s = random_vec(&mut rng, rows * cols, 4.0);
            let t = random_vec(&mut rng, rows * cols, 4.0);
            // Row 0 of the student is shifted: exp without the max shift would overflow.
            s[..cols].iter_mut().for_each(|v| *v += offset);
            let want_loss = soft_target_loss_reference(&s, &t, cols, temperature) as f32;
            let want_grad = soft_target_loss_backward_reference(&s, &t, cols, temperature, 0.5);
            for gpu in devices() {
                let (student, teacher) = (upload(gpu, &s, rows, cols), upload(gpu, &t, rows, cols));
                let out = soft_target_loss(&student, &teacher, temperature).unwrap();
                let name = format!("soft target N {rows} V {cols} T {temperature} on {}", gpu.adapter_info().name);
                assert_close(&format!("{name} loss"), &block_on(out.loss.to_vec::<f32>()).unwrap(), &[want_loss], 1e-6, 1e-5);
                let grad = soft_target_loss_backward(&student, &teacher, &out, 0.5).unwrap();
                assert_close(&format!("{name} gradient"), &block_on(grad.to_vec::<f32>()).unwrap(), &want_grad, 1e-8, 1e-5);
            }
        }
    }

    #[test]
    fn identical_distributions_have_no_soft_target_loss() {
        let v = [1.0f32, -2.0, 0.5, 3.0, 3.0, 3.0];
        for gpu in devices() {
            let (student, teacher) = (upload(gpu, &v, 2, 3), upload(gpu, &v, 2, 3));
            let out = soft_target_loss(&student, &teacher, 2.0).unwrap();
            let loss = block_on(out.loss.to_vec::<f32>()).unwrap()[0];
            assert!(loss.abs() < 1e-6, "loss {loss} on {}", gpu.adapter_info().name);
        }
    }

    #[test]
    fn cosine_loss_and_its_gradient_match_the_reference() {
        let mut rng = rng(2);
        for (rows, cols) in [(1, 1), (4, 8), (37, 300), (2, 1000)] {
            let s = random_vec(&mut rng, rows * cols, 2.0);
            let t = random_vec(&mut rng, rows * cols, 2.0);
            let (want_loss, want_grad) = cosine_loss_reference(&s, &t, cols, 1.5);
            for gpu in devices() {
                let (loss, grad) = cosine_loss_backward(&upload(gpu, &s, rows, cols), &upload(gpu, &t, rows, cols), 1.5).unwrap();
                let name = format!("cosine N {rows} H {cols} on {}", gpu.adapter_info().name);
                assert_close(&format!("{name} loss"), &block_on(loss.to_vec::<f32>()).unwrap(), &[want_loss as f32], 1e-6, 1e-5);
                assert_close(&format!("{name} gradient"), &block_on(grad.to_vec::<f32>()).unwrap(), &want_grad, 1e-7, 1e-4);
            }
        }
    }

    #[test]
    fn references_match_finite_differences() {
        let mut rng = rng(3);
        let (rows, cols) = (3, 5);
        let s = random_vec(&mut rng, rows * cols, 2.0);
        let t = random_vec(&mut rng, rows * cols, 2.0);
        let analytic = soft_target_loss_backward_reference(&s, &t, cols, 2.0, 1.5);
        let numeric = numeric_gradient(&s, 1e-3, |x| 1.5 * soft_target_loss_reference(x, &t, cols, 2.0));
        assert_close("soft-target gradient vs finite differences", &analytic, &numeric, 1e-3, 1e-3);
        let analytic = cosine_loss_reference(&s, &t, cols, 1.5).1;
        let numeric = numeric_gradient(&s, 1e-3, |x| 1.5 * cosine_loss_reference(x, &t, cols, 1.0).0);
        assert_close("cosine gradient vs finite differences", &analytic, &numeric, 1e-3, 1e-3);
    }

    #[test]
    fn bad_operands_are_errors() {
        for gpu in devices() {
            let (a, b) = (upload(gpu, &[0.0; 6], 2, 3), upload(gpu, &[0.0; 6], 3, 2));
            let err = soft_target_loss(&a, &b, 1.0).unwrap_err().to_string();
            assert!(err.contains("soft_target_loss") && err.contains("differ in shape"), "{err}");
            for temperature in [0.0, -1.0, f32::NAN, f32::INFINITY] {
                let err = soft_target_loss(&a, &a, temperature).unwrap_err().to_string();
                assert!(err.contains("temperature must be a positive number"), "{err}");
            }
            let err = cosine_loss_backward(&a, &b, 1.0).unwrap_err().to_string();
            assert!(err.contains("cosine_loss") && err.contains("differ in shape"), "{err}");
        }
    }
}
