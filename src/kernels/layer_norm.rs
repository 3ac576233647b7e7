//! Params, kernel declarations and host twins of `shaders/layer_norm.wgsl` and `shaders/layer_norm_backward.wgsl`
//! (`ops::layer_norm`).

use super::lanes::sum_by;
use super::{each_chunk, each_chunk_pair, pieces, scratch, HostCall, MIN_SPLIT_VALUES};
use super::{kernel_params, Access, Kernel, KernelParams};
use crate::error::Result;

pub(crate) const KERNEL: Kernel = Kernel {
    shader: "layer_norm",
    source: concat!(include_str!(concat!(env!("OUT_DIR"), "/reduce.wgsl")), include_str!(concat!(env!("OUT_DIR"), "/layer_norm.wgsl"))),
    entry: "layer_norm",
    bindings: &[Access::Read, Access::Read, Access::Read, Access::ReadWrite, Access::ReadWrite, Access::ReadWrite],
    params: Params::LAYOUT,
    twin: Some(layer_norm),
};

const BACKWARD_SOURCE: &str =
    concat!(include_str!(concat!(env!("OUT_DIR"), "/reduce.wgsl")), include_str!(concat!(env!("OUT_DIR"), "/layer_norm_backward.wgsl")));

pub(crate) const BACKWARD: Kernel = Kernel {
    shader: "layer_norm_backward",
    source: BACKWARD_SOURCE,
    entry: "layer_norm_backward",
    bindings: &[Access::Read, Access::Read, Access::Read, Access::Read, Access::Read, Access::ReadWrite],
    params: Params::LAYOUT,
    twin: Some(layer_norm_backward),
};

pub(crate) const PARAM_GRADS: Kernel = Kernel {
    shader: "layer_norm_backward",
    source: BACKWARD_SOURCE,
    entry: "layer_norm_param_grads",
    bindings: &[Access::Read, Access::Read, Access::Read, Access::Read, Access::Read, Access::ReadWrite, Access::ReadWrite],
    params: Params::LAYOUT,
    twin: Some(layer_norm_param_grads),
};

/// Every kernel of this module, for the checks over all kernels (`kernels::all`).
#[cfg(test)]
pub(crate) const KERNELS: &[&Kernel] = &[&KERNEL, &BACKWARD, &PARAM_GRADS];

kernel_params! {
    pub(crate) struct Params {
        pub rows: u32,
        pub cols: u32,
        pub eps: f32,
        pub _pad: u32,
    }
}

/// x [rows, cols], gamma and beta [cols] → y [rows, cols] = (x − mean)·rstd·gamma + beta,
/// mean and rstd [rows] (rstd = 1/√(var + eps), the biased variance). As in the WGSL, each row
/// is shifted by its first element before the mean is taken, and the variance is summed from
/// the centered values in a second pass, so rows with a large mean keep their precision.
pub(crate) fn layer_norm(call: &mut HostCall<'_>) -> Result<()> {
    let p: Params = call.params()?;
    let (x, gamma, beta) = (call.read(0)?, call.read(1)?, call.read(2)?);
    let (y, mean, rstd) = (call.write(3)?, call.write(4)?, call.write(5)?);
    let (rows, cols) = (p.rows as usize, p.cols as usize);
    if rows == 0 {
        return Ok(());
    }
    if cols == 0 || x.len() < rows * cols || y.len() < rows * cols || mean.len() < rows || rstd.len() < rows {
        return Err(call.fault(format!("{rows} rows of {cols} do not fit the bindings")));
    }
    let n = cols as f32;
    // Bands of rows over the device's threads, each with its rows' (mean, rstd) pairs.
    let threads = call.threads();
    let band = rows.div_ceil(pieces(threads, rows, MIN_SPLIT_VALUES.div_ceil(cols)));
    let mut stats = scratch(2 * rows)?;
    each_chunk_pair(threads, (&mut y[..rows * cols], band * cols), (&mut stats, 2 * band), |i, y, stats| {
        let x = &x[i * band * cols..];
        for ((x, y), stats) in x.chunks_exact(cols).zip(y.chunks_exact_mut(cols)).zip(stats.chunks_exact_mut(2)) {
            let shift = x[0];
            let d = sum_by(x, |v| v - shift) / n; // mean − shift
            let q = sum_by(x, |v| {
                let centered = (v - shift) - d;
                centered * centered
            });
            let r = 1.0 / (q / n + p.eps).sqrt();
            for (((y, &v), &g), &b) in y.iter_mut().zip(x).zip(gamma).zip(beta) {
                *y = ((v - shift) - d) * r * g + b;
            }
            stats.copy_from_slice(&[shift + d, r]);
        }
        Ok(())
    })?;
    for ((mean, rstd), pair) in mean.iter_mut().zip(rstd.iter_mut()).zip(stats.chunks_exact(2)) {
        (*mean, *rstd) = (pair[0], pair[1]);
    }
    Ok(())
}

/// x, dy [rows, cols], gamma [cols], the forward's mean and rstd [rows] → dx [rows, cols] =
/// rstd·(g − mean(g) − x̂·mean(g·x̂)) with x̂ = (x − mean)·rstd and g = dy·gamma; in bands of
/// rows over the device's threads, as the forward.
pub(crate) fn layer_norm_backward(call: &mut HostCall<'_>) -> Result<()> {
    use super::lanes::sum_indexed;
    let p: Params = call.params()?;
    let (x, gamma, mean, rstd, dy) = (call.read(0)?, call.read(1)?, call.read(2)?, call.read(3)?, call.read(4)?);
    let dx = call.write(5)?;
    let (rows, cols) = (p.rows as usize, p.cols as usize);
    if rows == 0 {
        return Ok(());
    }
    let n = rows * cols;
    if cols == 0 || gamma.len() < cols || x.len() < n || dy.len() < n || dx.len() < n || mean.len() < rows || rstd.len() < rows {
        return Err(call.fault(format!("{rows} rows of {cols} do not fit the bindings")));
    }
    let gamma = &gamma[..cols];
    let threads = call.threads();
    let band = rows.div_ceil(pieces(threads, rows, MIN_SPLIT_VALUES.div_ceil(cols)));
    each_chunk(threads, &mut dx[..n], band * cols, |i, dx| {
        let first = i * band;
        let (x, dy) = (&x[first * cols..], &dy[first * cols..]);
        let rows_of = x.chunks_exact(cols).zip(dy.chunks_exact(cols)).zip(dx.chunks_exact_mut(cols)).zip(mean[first..].iter().zip(&rstd[first..]));
        for (((x, dy), dx), (&mu, &r)) in rows_of {
            let mean_g = sum_indexed(cols, |c| dy[c] * gamma[c]) / cols as f32;
            let mean_gx = sum_indexed(cols, |c| dy[c] * gamma[c] * (x[c] - mu) * r) / cols as f32;
            for (c, dx) in dx.iter_mut().enumerate() {
                let xhat = (x[c] - mu) * r;
                *dx = r * (dy[c] * gamma[c] - mean_g - xhat * mean_gx);
            }
        }
        Ok(())
    })
}

/// x, dy [rows, cols], mean and rstd [rows] → dgamma [cols] += Σ_rows dy·x̂ and
/// dbeta [cols] += Σ_rows dy, summed row by row as the WGSL's one invocation per column does.
pub(crate) fn layer_norm_param_grads(call: &mut HostCall<'_>) -> Result<()> {
    let p: Params = call.params()?;
    let (x, mean, rstd, dy) = (call.read(0)?, call.read(2)?, call.read(3)?, call.read(4)?);
    let (dgamma, dbeta) = (call.write(5)?, call.write(6)?);
    let (rows, cols) = (p.rows as usize, p.cols as usize);
    let n = rows * cols;
    if x.len() < n || dy.len() < n || mean.len() < rows || rstd.len() < rows || dgamma.len() < cols || dbeta.len() < cols {
        return Err(call.fault(format!("{rows} rows of {cols} do not fit the bindings")));
    }
    if cols == 0 {
        return Ok(());
    }
    // Row-major sweeps (every column's running sums at once) rather than a column walk.
    let mut sum_gamma = vec![0.0f32; cols];
    let mut sum_beta = vec![0.0f32; cols];
    for ((x, dy), (&mu, &r)) in x.chunks_exact(cols).zip(dy.chunks_exact(cols)).zip(mean.iter().zip(rstd)).take(rows) {
        for c in 0..cols {
            sum_gamma[c] += dy[c] * (x[c] - mu) * r;
            sum_beta[c] += dy[c];
        }
    }
    for (d, s) in dgamma.iter_mut().zip(sum_gamma) {
        *d += s;
    }
    for (d, s) in dbeta.iter_mut().zip(sum_beta) {
        *d += s;
    }
    Ok(())
}
