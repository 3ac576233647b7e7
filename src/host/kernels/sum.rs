//! Host twins of `shaders/sum.wgsl` (`ops::sum`).

use super::lanes::sum_by;
use crate::error::Result;
use crate::host::HostCall;
use crate::ops::sum::Params;

/// x [rows, cols] → out [cols] += Σ_r x[r, ·]: each column summed over the rows in order, then
/// added to out, as the WGSL's one invocation per column does.
pub(crate) fn column_sums(call: &mut HostCall<'_>) -> Result<()> {
    let p: Params = call.params()?;
    let (x, out) = (call.read(0)?, call.write(1)?);
    let (rows, cols) = (p.rows as usize, p.cols as usize);
    if cols == 0 {
        return Ok(());
    }
    if x.len() < rows * cols || out.len() < cols {
        return Err(call.fault(format!("{rows} rows of {cols} do not fit the bindings")));
    }
    let mut sums = vec![0.0f32; cols];
    for row in x.chunks_exact(cols).take(rows) {
        for (s, &v) in sums.iter_mut().zip(row) {
            *s += v;
        }
    }
    for (o, &s) in out.iter_mut().zip(&sums) {
        *o += s;
    }
    Ok(())
}

/// x [cols] (every element of a tensor) → out[slot] = Σ x²; the other slots are left as they are.
pub(crate) fn sum_squares(call: &mut HostCall<'_>) -> Result<()> {
    let p: Params = call.params()?;
    let (x, out) = (call.read(0)?, call.write(1)?);
    let n = p.cols as usize;
    let x = x.get(..n).ok_or_else(|| call.fault(format!("{n} elements do not fit x of {}", x.len())))?;
    let len = out.len();
    let slot = out.get_mut(p.slot as usize).ok_or_else(|| call.fault(format!("slot {} is outside out of {len}", p.slot)))?;
    *slot = sum_by(x, |v| v * v);
    Ok(())
}
