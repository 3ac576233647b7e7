//! Host twin of `shaders/dropout.wgsl` (`ops::dropout`): inverted dropout with the mask
//! regenerated from its key by [`MaskParams::factor`](crate::ops::dropout::MaskParams), the
//! CPU mirror of `dropout_mask.wgsl`, so both devices drop the same elements.

use crate::error::Result;
use crate::host::HostCall;
use crate::ops::dropout::Params;

/// x [n] → y [n] = x·factor(i): 0 where element i is dropped, 1/(1 − p) where it is kept.
pub(crate) fn dropout(call: &mut HostCall<'_>) -> Result<()> {
    let p: Params = call.params()?;
    let (x, y) = (call.read(0)?, call.write(1)?);
    let n = p.n as usize;
    if x.len() < n || y.len() < n {
        return Err(call.fault(format!("{n} elements do not fit the bindings")));
    }
    for (i, (y, &x)) in (0u32..).zip(y[..n].iter_mut().zip(&x[..n])) {
        *y = x * p.mask.factor(i);
    }
    Ok(())
}
