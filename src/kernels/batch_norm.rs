//! Params, kernel declarations and host twins of `batch_norm.wgsl` (`ops::batch_norm`):
//! BatchNorm1d over x [N, C] in training (batch statistics, the running statistics updated)
//! and at evaluation (running statistics), and its backward. One feature at a time, the rows
//! walked in order, as the shader's invocations do.

use super::HostCall;
use super::{kernel_params, Access, Kernel, KernelParams, Twin};
use crate::error::Result;
use Access::{Read, ReadWrite};

const SOURCE: &str = include_str!(concat!(env!("OUT_DIR"), "/batch_norm.wgsl"));

const fn kernel(entry: &'static str, bindings: &'static [Access], twin: Twin) -> Kernel {
    Kernel { shader: "batch_norm", source: SOURCE, entry, bindings, params: Params::LAYOUT, twin: Some(twin) }
}

// x, gamma, beta, y, stats
pub(crate) const TRAIN: Kernel = kernel("batch_norm_train", &[Read, Read, Read, ReadWrite, ReadWrite], train);
// stats, running_mean, running_var
pub(crate) const RUNNING: Kernel = kernel("batch_norm_running", &[Read, ReadWrite, ReadWrite], running);
// x, gamma, beta, running_mean, running_var, y
pub(crate) const EVAL: Kernel = kernel("batch_norm_eval", &[Read, Read, Read, Read, Read, ReadWrite], eval);
// x, gamma, saved stats, dy, dx, d_gamma, d_beta
pub(crate) const BACKWARD: Kernel = kernel("batch_norm_backward", &[Read, Read, Read, Read, ReadWrite, ReadWrite, ReadWrite], backward);

/// Every kernel of this module, for the checks over all kernels (`kernels::all`).
#[cfg(test)]
pub(crate) const KERNELS: &[&Kernel] = &[&TRAIN, &RUNNING, &EVAL, &BACKWARD];

kernel_params! {
    pub(crate) struct Params {
        pub(crate) rows: u32,
        pub(crate) cols: u32,
        pub(crate) eps: f32,
        pub(crate) momentum: f32,
    }
}

/// Faults unless each binding (name, length, elements the params need) holds its elements.
fn check(call: &HostCall<'_>, bindings: &[(&str, usize, usize)]) -> Result<()> {
    match bindings.iter().find(|&&(_, len, need)| len < need) {
        Some((what, len, need)) => Err(call.fault(format!("{what} holds {len} elements, the params need {need}"))),
        None => Ok(()),
    }
}

pub(crate) fn train(call: &mut HostCall<'_>) -> Result<()> {
    let p: Params = call.params()?;
    let (x, gamma, beta) = (call.read(0)?, call.read(1)?, call.read(2)?);
    let (y, stats) = (call.write(3)?, call.write(4)?);
    let (rows, cols) = (p.rows as usize, p.cols as usize);
    let n = rows * cols;
    check(call, &[("x", x.len(), n), ("gamma", gamma.len(), cols), ("beta", beta.len(), cols), ("y", y.len(), n), ("stats", stats.len(), 3 * cols)])?;
    let count = p.rows as f32;
    for c in 0..cols {
        let column = (0..rows).map(|r| x[r * cols + c]);
        let mean = column.clone().fold(0.0, |s, v| s + v) / count;
        let variance = column.fold(0.0, |s, v| s + (v - mean) * (v - mean)) / count;
        let inv_std = 1.0 / (variance + p.eps).sqrt();
        for r in 0..rows {
            let i = r * cols + c;
            y[i] = (x[i] - mean) * inv_std * gamma[c] + beta[c];
        }
        (stats[c], stats[cols + c], stats[2 * cols + c]) = (mean, variance, inv_std);
    }
    Ok(())
}

pub(crate) fn running(call: &mut HostCall<'_>) -> Result<()> {
    let p: Params = call.params()?;
    let stats = call.read(0)?;
    let (running_mean, running_var) = (call.write(1)?, call.write(2)?);
    let cols = p.cols as usize;
    check(call, &[("stats", stats.len(), 3 * cols), ("running_mean", running_mean.len(), cols), ("running_var", running_var.len(), cols)])?;
    let n = p.rows as f32;
    for c in 0..cols {
        let unbiased = stats[cols + c] * n / (n - 1.0).max(1.0);
        running_mean[c] = (1.0 - p.momentum) * running_mean[c] + p.momentum * stats[c];
        running_var[c] = (1.0 - p.momentum) * running_var[c] + p.momentum * unbiased;
    }
    Ok(())
}

pub(crate) fn eval(call: &mut HostCall<'_>) -> Result<()> {
    let p: Params = call.params()?;
    let (x, gamma, beta, mean, var) = (call.read(0)?, call.read(1)?, call.read(2)?, call.read(3)?, call.read(4)?);
    let y = call.write(5)?;
    let (rows, cols) = (p.rows as usize, p.cols as usize);
    let n = rows * cols;
    check(
        call,
        &[("x", x.len(), n), ("gamma", gamma.len(), cols), ("beta", beta.len(), cols), ("mean", mean.len(), cols), ("var", var.len(), cols), ("y", y.len(), n)],
    )?;
    for c in 0..cols {
        let scale = gamma[c] / (var[c] + p.eps).sqrt();
        for r in 0..rows {
            let i = r * cols + c;
            y[i] = (x[i] - mean[c]) * scale + beta[c];
        }
    }
    Ok(())
}

pub(crate) fn backward(call: &mut HostCall<'_>) -> Result<()> {
    let p: Params = call.params()?;
    let (x, gamma, saved, dy) = (call.read(0)?, call.read(1)?, call.read(2)?, call.read(3)?);
    let (dx, d_gamma, d_beta) = (call.write(4)?, call.write(5)?, call.write(6)?);
    let (rows, cols) = (p.rows as usize, p.cols as usize);
    let n = rows * cols;
    let bindings = [
        ("x", x.len(), n),
        ("gamma", gamma.len(), cols),
        ("stats", saved.len(), 3 * cols),
        ("dy", dy.len(), n),
        ("dx", dx.len(), n),
        ("d_gamma", d_gamma.len(), cols),
        ("d_beta", d_beta.len(), cols),
    ];
    check(call, &bindings)?;
    let count = p.rows as f32;
    for c in 0..cols {
        let (mean, inv_std) = (saved[c], saved[2 * cols + c]);
        let (mut sum_dy, mut sum_dy_xhat) = (0.0, 0.0);
        for r in 0..rows {
            let i = r * cols + c;
            sum_dy += dy[i];
            sum_dy_xhat += dy[i] * (x[i] - mean) * inv_std;
        }
        d_gamma[c] += sum_dy_xhat;
        d_beta[c] += sum_dy;
        let k = gamma[c] * inv_std / count;
        for r in 0..rows {
            let i = r * cols + c;
            let xhat = (x[i] - mean) * inv_std;
            dx[i] = k * (count * dy[i] - sum_dy - xhat * sum_dy_xhat);
        }
    }
    Ok(())
}
