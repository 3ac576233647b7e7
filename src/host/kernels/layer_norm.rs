//! Host twin of `shaders/layer_norm.wgsl` (`ops::layer_norm`).

use super::lanes::sum_by;
use crate::error::Result;
use crate::host::HostCall;
use crate::ops::layer_norm::Params;

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
    let rows_of = x.chunks_exact(cols).zip(y.chunks_exact_mut(cols)).zip(mean.iter_mut().zip(rstd.iter_mut())).take(rows);
    for ((x, y), (mean, rstd)) in rows_of {
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
        *mean = shift + d;
        *rstd = r;
    }
    Ok(())
}
