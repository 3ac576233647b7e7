//! Cross-entropy of logits against class targets (`shaders/cross_entropy.wgsl`), fusing
//! log-softmax and the negative log-likelihood so the [N, V] log-probabilities are never
//! stored (V = 50257 for GPT-2). Saves the per-row logsumexp for the backward pass
//! (softmax = exp(logits − logsumexp)).
//!
//! Targets come from the host as i64 (as in PyTorch) and are validated there; rows whose
//! target equals `ignore_index` (PyTorch's default −100) get loss 0 and are left out of the
//! mean. The mean of a batch whose rows are all ignored is defined as 0 (PyTorch gives NaN),
//! so that a padded-out micro-batch contributes nothing instead of poisoning a sum.

use super::{as_u32, expect_f32, grid_1d};
use crate::error::{arg_err, shape_err, Result};
use crate::kernels::cross_entropy::{Params, BACKWARD, MEAN, ROWS};
use crate::tensor::{DType, Tensor};

/// PyTorch's default `ignore_index`.
pub const DEFAULT_IGNORE_INDEX: i64 = -100;

/// The target the kernel sees for an ignored row.
const IGNORED: u32 = u32::MAX;

/// Outputs of [`cross_entropy`].
#[derive(Clone, Debug)]
pub struct CrossEntropyOutput {
    /// `[1]`: the mean loss over the rows that are not ignored (0 if all are).
    pub loss: Tensor,
    /// `[N]`: each row's loss, 0 for ignored rows.
    pub losses: Tensor,
    /// `[N]`: each row's logsumexp, for the backward pass.
    pub logsumexp: Tensor,
    /// `[N]`: the targets as the kernels see them, for the backward pass.
    targets: Tensor,
    /// Rows not ignored: the mean's divisor.
    pub counted: usize,
}

/// Cross-entropy of logits [N, V] against `targets` (N classes in 0..V, or `ignore_index`).
pub fn cross_entropy(logits: &Tensor, targets: &[i64], ignore_index: i64) -> Result<CrossEntropyOutput> {
    let op = "cross_entropy";
    expect_f32(op, "logits", logits, 2)?;
    let (rows, vocab) = (logits.shape()[0], logits.shape()[1]);
    if targets.len() != rows {
        return Err(shape_err!(op, "{} targets for {rows} rows of logits {:?}", targets.len(), logits.shape()));
    }
    let vocab_u32 = as_u32(op, "V", vocab)?;
    if vocab_u32 == IGNORED {
        return Err(shape_err!(op, "V = {vocab} leaves no room for the ignored-target marker"));
    }
    let mut ids = Vec::with_capacity(rows);
    for (row, &target) in targets.iter().enumerate() {
        ids.push(match target {
            t if t == ignore_index => IGNORED,
            t if (0..vocab as i64).contains(&t) => t as u32,
            t => return Err(arg_err!(op, "target {t} of row {row} is out of range 0..{vocab} (ignore_index {ignore_index})")),
        });
    }
    let gpu = logits.gpu();
    let target_ids = Tensor::from_slice(gpu, &ids, &[rows])?;
    let losses = Tensor::empty(gpu, &[rows], DType::F32)?;
    let logsumexp = Tensor::empty(gpu, &[rows], DType::F32)?;
    let loss = Tensor::empty(gpu, &[1], DType::F32)?;
    let params = Params { rows: as_u32(op, "N", rows)?, vocab: vocab_u32, scale: 0.0, _pad: 0 };
    let bindings = [logits.into(), (&target_ids).into(), (&losses).into(), (&logsumexp).into(), (&loss).into()];
    gpu.dispatch(&ROWS, &[], &params, &bindings, grid_1d(gpu, rows, 1))?;
    gpu.dispatch(&MEAN, &[], &params, &bindings, [1, 1, 1])?;
    let counted = ids.iter().filter(|&&id| id != IGNORED).count();
    Ok(CrossEntropyOutput { loss, losses, logsumexp, targets: target_ids, counted })
}

/// The backward of [`cross_entropy`]'s mean loss scaled by `d_loss`, written over `logits`
/// (which the forward pass read; they are not needed afterwards, and at [N, V] they are the
/// largest activation): d logits = d_loss/counted · (softmax − one-hot), 0 on ignored rows.
/// Returns `logits`, now holding the gradient.
pub fn cross_entropy_backward(logits: Tensor, forward: &CrossEntropyOutput, d_loss: f32) -> Result<Tensor> {
    let op = "cross_entropy_backward";
    expect_f32(op, "logits", &logits, 2)?;
    let (rows, vocab) = (logits.shape()[0], logits.shape()[1]);
    if forward.targets.numel() != rows {
        return Err(shape_err!(op, "logits {:?} are not those of the forward pass ({} rows)", logits.shape(), forward.targets.numel()));
    }
    let scale = if forward.counted == 0 { 0.0 } else { d_loss / forward.counted as f32 };
    let total = rows.checked_mul(vocab).ok_or_else(|| shape_err!(op, "{rows} × {vocab} logits overflow"))?;
    as_u32(op, "logits", total)?;
    let params = Params { rows: as_u32(op, "N", rows)?, vocab: as_u32(op, "V", vocab)?, scale, _pad: 0 };
    let gpu = logits.gpu();
    let bindings = [(&logits).into(), (&forward.targets).into(), (&forward.losses).into(), (&forward.logsumexp).into()];
    gpu.dispatch(&BACKWARD, &[], &params, &bindings, grid_1d(gpu, total, 256))?;
    Ok(logits)
}

#[cfg(test)]
/// CPU reference of [`cross_entropy_backward`] in f64: d logits of d_loss × the mean loss.
pub(crate) fn cross_entropy_backward_reference(logits: &[f32], targets: &[i64], ignore_index: i64, vocab: usize, d_loss: f32) -> Vec<f32> {
    let (_, _, lses) = cross_entropy_reference(logits, targets, ignore_index, vocab);
    let counted = targets.iter().filter(|&&t| t != ignore_index).count();
    let scale = if counted == 0 { 0.0 } else { d_loss as f64 / counted as f64 };
    let mut grad = Vec::with_capacity(logits.len());
    for ((row, &target), &lse) in logits.chunks(vocab).zip(targets).zip(&lses) {
        for (c, &v) in row.iter().enumerate() {
            let g = if target == ignore_index { 0.0 } else { scale * ((v as f64 - lse as f64).exp() - (c as i64 == target) as u32 as f64) };
            grad.push(g as f32);
        }
    }
    grad
}

#[cfg(test)]
/// CPU reference of [`cross_entropy`] in f64: (mean loss, per-row losses, per-row logsumexp)
/// for logits [targets.len(), vocab] and already validated targets.
pub(crate) fn cross_entropy_reference(logits: &[f32], targets: &[i64], ignore_index: i64, vocab: usize) -> (f32, Vec<f32>, Vec<f32>) {
    let (mut losses, mut lses) = (Vec::new(), Vec::new());
    let (mut total, mut count) = (0f64, 0usize);
    for (row, &target) in logits.chunks(vocab).zip(targets) {
        let mut max = f64::NEG_INFINITY;
        for &v in row {
            max = max.max(v as f64);
        }
        let mut sum = 0f64;
        for &v in row {
            sum += (v as f64 - max).exp();
        }
        let lse = max + sum.ln();
        let loss = if target == ignore_index { 0.0 } else { lse - row[target as usize] as f64 };
        if target != ignore_index {
            total += loss;
            count += 1;
        }
        losses.push(loss as f32);
        lses.push(lse as f32);
    }
    let mean = if count == 0 { 0.0 } else { total / count as f64 };
    (mean as f32, losses, lses)
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::gpu::testing::devices;
    use crate::ops::testing::{assert_close, numeric_gradient, random_vec, rng};
    use pollster::block_on;
    use rand::Rng;

    // Tolerance: 1e-5 relative, plus 1e-6 absolute for losses near 0 (V = 1: WGSL's log has
    // an absolute error bound of 2^-21 near 1). Sums of up to 50257 exps in f32.
    const RTOL: f32 = 1e-5;
    const ATOL: f32 = 1e-6;

    fn check(rows: usize, vocab: usize, ignore_every: usize, offset: f32, seed: u64) {
        for gpu in devices() {
            let mut rng = rng(seed);
            let mut lv = random_vec(&mut rng, rows * vocab, 4.0);
            // Row 0 is shifted by `offset`: exp without the max shift would overflow.
            lv[..vocab].iter_mut().for_each(|v| *v += offset);
            let targets: Vec<i64> =
                (0..rows).map(|r| if ignore_every > 0 && r % ignore_every == 1 { DEFAULT_IGNORE_INDEX } else { rng.random_range(0..vocab as i64) }).collect();
            let logits = Tensor::from_slice(gpu, &lv, &[rows, vocab]).unwrap();
            let out = cross_entropy(&logits, &targets, DEFAULT_IGNORE_INDEX).unwrap();
            let (mean, losses, lses) = cross_entropy_reference(&lv, &targets, DEFAULT_IGNORE_INDEX, vocab);
            let name = format!("cross_entropy N {rows} V {vocab} on {}", gpu.adapter_info().name);
            assert_close(&format!("{name} losses"), &block_on(out.losses.to_vec::<f32>()).unwrap(), &losses, ATOL, RTOL);
            assert_close(&format!("{name} logsumexp"), &block_on(out.logsumexp.to_vec::<f32>()).unwrap(), &lses, ATOL, RTOL);
            assert_close(&format!("{name} mean"), &block_on(out.loss.to_vec::<f32>()).unwrap(), &[mean], ATOL, RTOL);
        }
    }

    #[test]
    fn cross_entropy_matches_reference() {
        check(1, 1, 0, 0.0, 1);
        check(7, 1, 3, 0.0, 2);
        check(300, 50, 4, 0.0, 3);
        check(13, 1000, 5, 1000.0, 4);
        check(3, 50257, 2, 0.0, 5);
        check(600, 7, 0, -500.0, 6);
    }

    #[test]
    fn backward_reference_matches_finite_differences() {
        let mut rng = rng(7);
        let (rows, vocab) = (4, 6);
        let lv = random_vec(&mut rng, rows * vocab, 3.0);
        let targets = [2, DEFAULT_IGNORE_INDEX, 0, 5];
        let analytic = cross_entropy_backward_reference(&lv, &targets, DEFAULT_IGNORE_INDEX, vocab, 1.5);
        let numeric = numeric_gradient(&lv, 1e-3, |l| 1.5 * cross_entropy_reference(l, &targets, DEFAULT_IGNORE_INDEX, vocab).0 as f64);
        assert_close("cross-entropy gradient vs finite differences", &analytic, &numeric, 1e-3, 1e-3);
    }

    #[test]
    fn backward_matches_reference() {
        let mut rng = rng(8);
        for (rows, vocab, ignore_every) in [(1, 1, 0), (300, 50, 4), (3, 50257, 2), (5, 7, 1)] {
            let lv = random_vec(&mut rng, rows * vocab, 4.0);
            // ignore_every 1 ignores every row: the gradient is all zeros.
            let targets: Vec<i64> = (0..rows)
                .map(|r| if ignore_every > 0 && r % ignore_every == ignore_every.min(2) - 1 { DEFAULT_IGNORE_INDEX } else { rng.random_range(0..vocab as i64) })
                .collect();
            let want = cross_entropy_backward_reference(&lv, &targets, DEFAULT_IGNORE_INDEX, vocab, 0.5);
            for gpu in devices() {
                let logits = Tensor::from_slice(gpu, &lv, &[rows, vocab]).unwrap();
                let forward = cross_entropy(&logits, &targets, DEFAULT_IGNORE_INDEX).unwrap();
                let grad = cross_entropy_backward(logits, &forward, 0.5).unwrap();
                let name = format!("cross_entropy backward N {rows} V {vocab} on {}", gpu.adapter_info().name);
                assert_close(&name, &block_on(grad.to_vec::<f32>()).unwrap(), &want, 1e-7, RTOL);
            }
        }
    }

    #[test]
    fn all_ignored_rows_give_a_zero_mean() {
        for gpu in devices() {
            let logits = Tensor::from_slice(gpu, &[1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
            // An ignore_index inside 0..V (a pad token id) takes precedence over the class.
            let out = cross_entropy(&logits, &[1, 1], 1).unwrap();
            assert_eq!(block_on(out.loss.to_vec::<f32>()).unwrap(), vec![0.0], "mean on {}", gpu.adapter_info().name);
            assert_eq!(block_on(out.losses.to_vec::<f32>()).unwrap(), vec![0.0, 0.0], "losses on {}", gpu.adapter_info().name);
        }
    }

    #[test]
    fn bad_targets_are_errors() {
        for gpu in devices() {
            let logits = Tensor::zeros(gpu, &[2, 5], DType::F32).unwrap();
            let e = cross_entropy(&logits, &[0, 5], DEFAULT_IGNORE_INDEX).unwrap_err().to_string();
            assert!(e.contains("cross_entropy") && e.contains("target 5 of row 1") && e.contains("0..5"), "{e}");
            let e = cross_entropy(&logits, &[0, -1], DEFAULT_IGNORE_INDEX).unwrap_err().to_string();
            assert!(e.contains("target -1"), "{e}");
            let e = cross_entropy(&logits, &[0], DEFAULT_IGNORE_INDEX).unwrap_err().to_string();
            assert!(e.contains("cross_entropy") && e.contains("1 targets for 2 rows"), "{e}");
            let flat = Tensor::zeros(gpu, &[5], DType::F32).unwrap();
            assert!(cross_entropy(&flat, &[0], DEFAULT_IGNORE_INDEX).unwrap_err().to_string().contains("cross_entropy"));
        }
    }
}
