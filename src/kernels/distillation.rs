//! Params, kernel declarations and host twins of `shaders/distillation.wgsl` (`ops::distillation`): the soft-target loss
//! (`soft_rows`, `soft_backward`), the cosine loss (`cosine`) and their mean (`mean`).

use super::lanes::{max_from, sum_by, sum_indexed};
use super::HostCall;
use super::{kernel_params, Access, Kernel, KernelParams};
use crate::error::Result;

const SOURCE: &str = concat!(include_str!(concat!(env!("OUT_DIR"), "/reduce.wgsl")), include_str!(concat!(env!("OUT_DIR"), "/distillation.wgsl")));

const ROWS_BINDINGS: &[Access] = &[Access::Read, Access::Read, Access::ReadWrite, Access::ReadWrite, Access::ReadWrite];

pub(crate) const SOFT_ROWS: Kernel =
    Kernel { shader: "distillation", source: SOURCE, entry: "soft_rows", bindings: ROWS_BINDINGS, params: Params::LAYOUT, twin: Some(soft_rows) };

pub(crate) const MEAN: Kernel =
    Kernel { shader: "distillation", source: SOURCE, entry: "mean", bindings: ROWS_BINDINGS, params: Params::LAYOUT, twin: Some(mean) };

pub(crate) const COSINE: Kernel = Kernel {
    shader: "distillation",
    source: SOURCE,
    entry: "cosine",
    bindings: &[Access::Read, Access::Read, Access::ReadWrite, Access::ReadWrite],
    params: Params::LAYOUT,
    twin: Some(cosine),
};

pub(crate) const SOFT_BACKWARD: Kernel = Kernel {
    shader: "distillation",
    source: SOURCE,
    entry: "soft_backward",
    bindings: &[Access::Read, Access::Read, Access::Read, Access::ReadWrite],
    params: Params::LAYOUT,
    twin: Some(soft_backward),
};

/// Every kernel of this module, for the checks over all kernels (`kernels::all`).
#[cfg(test)]
pub(crate) const KERNELS: &[&Kernel] = &[&SOFT_ROWS, &MEAN, &COSINE, &SOFT_BACKWARD];

kernel_params! {
    pub(crate) struct Params {
        pub(crate) rows: u32,
        pub(crate) cols: u32,
        pub(crate) inv_temperature: f32,
        pub(crate) scale: f32,
    }
}

/// What the WGSL adds to each squared norm of `cosine` (PyTorch's cosine_embedding_loss).
const NORM_EPS: f32 = 1e-12;

/// student s, teacher t [rows, cols] → losses [rows] = KL(softmax(t/T) ‖ softmax(s/T)) and
/// logsumexp [rows, 2] = (logsumexp of s/T, of t/T), each max-shifted by the raw row's max.
pub(crate) fn soft_rows(call: &mut HostCall<'_>) -> Result<()> {
    let p: Params = call.params()?;
    let (student, teacher) = (call.read(0)?, call.read(1)?);
    let (losses, logsumexp) = (call.write(2)?, call.write(3)?);
    let (rows, cols, inv_t) = (p.rows as usize, p.cols as usize, p.inv_temperature);
    let total = rows.checked_mul(cols).ok_or_else(|| call.fault(format!("{rows} × {cols} overflow")))?;
    if student.len() < total || teacher.len() < total || losses.len() < rows || logsumexp.len() / 2 < rows {
        return Err(call.fault(format!("{rows} rows of {cols} do not fit the bindings")));
    }
    let outputs = losses[..rows].iter_mut().zip(logsumexp[..2 * rows].chunks_exact_mut(2));
    for (r, (loss, lse)) in outputs.enumerate() {
        let (s_row, t_row) = (&student[r * cols..(r + 1) * cols], &teacher[r * cols..(r + 1) * cols]);
        let (ms, mt) = (max_from(-3.0e38, s_row), max_from(-3.0e38, t_row));
        let log_ss = sum_by(s_row, |v| ((v - ms) * inv_t).exp()).ln();
        let log_st = sum_by(t_row, |v| ((v - mt) * inv_t).exp()).ln();
        *loss = sum_indexed(cols, |c| {
            let log_q = (s_row[c] - ms) * inv_t - log_ss;
            let log_p = (t_row[c] - mt) * inv_t - log_st;
            log_p.exp() * (log_p - log_q)
        });
        lse[0] = ms * inv_t + log_ss;
        lse[1] = mt * inv_t + log_st;
    }
    Ok(())
}

/// student s, teacher t [rows, cols], saved [rows, 2] (from [`soft_rows`]) → grad
/// [rows, cols] = scale·(softmax(s/T) − softmax(t/T)), overwritten.
pub(crate) fn soft_backward(call: &mut HostCall<'_>) -> Result<()> {
    let p: Params = call.params()?;
    let (student, teacher, saved) = (call.read(0)?, call.read(1)?, call.read(2)?);
    let grad = call.write(3)?;
    let (rows, cols, inv_t) = (p.rows as usize, p.cols as usize, p.inv_temperature);
    let total = rows.checked_mul(cols).ok_or_else(|| call.fault(format!("{rows} × {cols} overflow")))?;
    if total == 0 {
        return Ok(());
    }
    if student.len() < total || teacher.len() < total || grad.len() < total || saved.len() / 2 < rows {
        return Err(call.fault(format!("{rows} rows of {cols} do not fit the bindings")));
    }
    let per_row = grad[..total].chunks_exact_mut(cols).zip(student.chunks_exact(cols)).zip(teacher.chunks_exact(cols)).zip(saved.chunks_exact(2));
    for (((g_row, s_row), t_row), lse) in per_row {
        for ((g, &s), &t) in g_row.iter_mut().zip(s_row).zip(t_row) {
            let q = (s * inv_t - lse[0]).exp();
            let target_p = (t * inv_t - lse[1]).exp();
            *g = p.scale * (q - target_p);
        }
    }
    Ok(())
}

/// student s, teacher t [rows, cols] → losses [rows] = 1 − cos(s, t) and grad [rows, cols] =
/// −scale·(t/‖s‖‖t‖ − cos·s/‖s‖²), with NORM_EPS added to each squared norm.
pub(crate) fn cosine(call: &mut HostCall<'_>) -> Result<()> {
    let p: Params = call.params()?;
    let (student, teacher) = (call.read(0)?, call.read(1)?);
    let (losses, grad) = (call.write(2)?, call.write(3)?);
    let (rows, cols) = (p.rows as usize, p.cols as usize);
    let total = rows.checked_mul(cols).ok_or_else(|| call.fault(format!("{rows} × {cols} overflow")))?;
    if student.len() < total || teacher.len() < total || grad.len() < total || losses.len() < rows {
        return Err(call.fault(format!("{rows} rows of {cols} do not fit the bindings")));
    }
    for (r, loss) in losses[..rows].iter_mut().enumerate() {
        let span = r * cols..(r + 1) * cols;
        let (s_row, t_row, g_row) = (&student[span.clone()], &teacher[span.clone()], &mut grad[span]);
        let dot = sum_indexed(cols, |c| s_row[c] * t_row[c]);
        let m1 = sum_by(s_row, |v| v * v) + NORM_EPS;
        let m2 = sum_by(t_row, |v| v * v) + NORM_EPS;
        let denom = (m1 * m2).sqrt();
        let cos = dot / denom;
        for ((g, &s), &t) in g_row.iter_mut().zip(s_row).zip(t_row) {
            *g = -p.scale * (t / denom - cos * s / m1);
        }
        *loss = 1.0 - cos;
    }
    Ok(())
}

/// losses [rows] (from [`soft_rows`] or [`cosine`]) → loss [1] = scale·Σ losses / rows (NaN
/// for no rows, as on the GPU).
pub(crate) fn mean(call: &mut HostCall<'_>) -> Result<()> {
    let p: Params = call.params()?;
    let (losses, loss) = (call.write(2)?, call.write(4)?);
    let rows = p.rows as usize;
    if losses.len() < rows || loss.is_empty() {
        return Err(call.fault(format!("{rows} rows do not fit the bindings")));
    }
    loss[0] = p.scale * sum_by(&losses[..rows], |v| v) / p.rows as f32;
    Ok(())
}
