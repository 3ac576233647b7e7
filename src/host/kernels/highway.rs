//! Host twin of `highway.wgsl`'s `highway` (`ops::highway`): for x [N, d] and proj [N, 2d]
//! (nonlinear half, then gate half), out [N, d] = gate·x + (1 − gate)·f(nonlinear) with
//! gate = σ(proj[:, d..2d]).

use super::activations::{sigmoid, tanh_or_relu, ACT_TANH};
use crate::error::Result;
use crate::host::HostCall;
use crate::ops::highway::Params;

pub(crate) fn highway(call: &mut HostCall<'_>) -> Result<()> {
    let p: Params = call.params()?;
    let (x, proj, out) = (call.read(0)?, call.read(1)?, call.write(2)?);
    let dim = p.dim as usize;
    if dim == 0 {
        return Ok(());
    }
    let tanh = p.activation == ACT_TANH;
    let rows = x.chunks_exact(dim).zip(proj.chunks_exact(2 * dim)).zip(out.chunks_exact_mut(dim)).take(p.rows as usize);
    for ((x, proj), out) in rows {
        let (nonlinear, gates) = proj.split_at(dim);
        for (((o, &x), &pre), &g) in out.iter_mut().zip(x).zip(nonlinear).zip(gates) {
            let gate = sigmoid(g);
            let f = tanh_or_relu(tanh, pre);
            *o = gate * x + (1.0 - gate) * f;
        }
    }
    Ok(())
}
