//! Params, kernel declarations and host twins of `highway.wgsl` (`ops::highway`), for x [N, d] and proj [N, 2d] (nonlinear
//! half, then gate half) with gate = σ(proj[:, d..2d]):
//! - `highway`: out [N, d] = gate·x + (1 − gate)·f(nonlinear);
//! - `highway_backward` (training): from d_out [N, d], overwrites d_proj [N, 2d] with
//!   (d_out·(1 − gate)·f'(nonlinear) | d_out·(x − f(nonlinear))·gate·(1 − gate)) and dx [N, d]
//!   with the direct part gate·d_out (the op adds d_proj·W); f' is 1 − f² for tanh, else 1
//!   where the pre-activation is > 0.

use super::activations::{sigmoid, tanh_or_relu, ACT_TANH};
use super::HostCall;
use super::{kernel_params, Access, Kernel, KernelParams};
use crate::error::Result;

pub(crate) const KERNEL: Kernel = Kernel {
    shader: "highway",
    source: include_str!(concat!(env!("OUT_DIR"), "/highway.wgsl")),
    entry: "highway",
    bindings: &[Access::Read, Access::Read, Access::ReadWrite],
    params: Params::LAYOUT,
    twin: Some(highway),
};

pub(crate) const BACKWARD: Kernel = Kernel {
    shader: "highway",
    source: include_str!(concat!(env!("OUT_DIR"), "/highway.wgsl")),
    entry: "highway_backward",
    // x, proj, d_out, d_proj, dx
    bindings: &[Access::Read, Access::Read, Access::Read, Access::ReadWrite, Access::ReadWrite],
    params: Params::LAYOUT,
    twin: Some(highway_backward),
};

/// Every kernel of this module, for the checks over all kernels (`kernels::all`).
#[cfg(test)]
pub(crate) const KERNELS: &[&Kernel] = &[&KERNEL, &BACKWARD];

kernel_params! {
    pub(crate) struct Params {
        pub(crate) rows: u32,
        pub(crate) dim: u32,
        pub(crate) activation: u32,
        pub _pad: u32,
    }
}

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

pub(crate) fn highway_backward(call: &mut HostCall<'_>) -> Result<()> {
    let p: Params = call.params()?;
    let (x, proj, d_out) = (call.read(0)?, call.read(1)?, call.read(2)?);
    let (d_proj, dx) = (call.write(3)?, call.write(4)?);
    let (rows, dim) = (p.rows as usize, p.dim as usize);
    if rows == 0 || dim == 0 {
        return Ok(());
    }
    let n = rows.saturating_mul(dim);
    if x.len() < n || d_out.len() < n || dx.len() < n || proj.len() < n.saturating_mul(2) || d_proj.len() < n.saturating_mul(2) {
        return Err(call.fault(format!("{rows} rows of {dim} do not fit the bindings")));
    }
    let tanh = p.activation == ACT_TANH;
    let row_inputs = x.chunks_exact(dim).zip(proj.chunks_exact(2 * dim)).zip(d_out.chunks_exact(dim));
    let row_grads = d_proj.chunks_exact_mut(2 * dim).zip(dx.chunks_exact_mut(dim));
    for (((x, proj), d_out), (d_proj, dx)) in row_inputs.zip(row_grads).take(rows) {
        let (nonlinear_pre, gate_pre) = proj.split_at(dim);
        let (d_nonlinear, d_gate) = d_proj.split_at_mut(dim);
        let inputs = x.iter().zip(nonlinear_pre).zip(gate_pre).zip(d_out);
        let grads = d_nonlinear.iter_mut().zip(d_gate.iter_mut()).zip(dx.iter_mut());
        for ((((&x, &pre), &g), &d), ((d_nonlinear, d_gate), dx)) in inputs.zip(grads) {
            let nonlinear = tanh_or_relu(tanh, pre);
            let gate = sigmoid(g);
            let slope = if tanh {
                1.0 - nonlinear * nonlinear
            } else if pre > 0.0 {
                1.0
            } else {
                0.0
            };
            *d_nonlinear = d * (1.0 - gate) * slope;
            *d_gate = d * (x - nonlinear) * gate * (1.0 - gate);
            *dx = d * gate;
        }
    }
    Ok(())
}
