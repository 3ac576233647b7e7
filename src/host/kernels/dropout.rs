//! Host twin of `dropout` (dropout.wgsl; `ops::dropout::Params`): y = x·factor(i).

use crate::error::Result;
use crate::host::HostCall;
use crate::ops::dropout::Params;

pub(crate) fn dropout(call: &mut HostCall<'_>) -> Result<()> {
    let p: Params = call.params()?;
    let x = call.read(0)?;
    let y = call.write(1)?;
    for (i, (y, &x)) in y.iter_mut().zip(x).take(p.n as usize).enumerate() {
        *y = x * p.mask.factor(i as u32);
    }
    Ok(())
}
