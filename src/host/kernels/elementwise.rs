//! Host twins of `shaders/elementwise.wgsl` (`ops::elementwise`): the forward entry points
//! `unary` and `binary`, with the WGSL's formulas (its erf approximation and clamped tanh), so
//! that both devices compute the same functions.

// The WGSL's constants, digit for digit.
#![allow(clippy::excessive_precision)]

use super::activations::safe_tanh;
use crate::error::Result;
use crate::host::HostCall;
use crate::ops::elementwise::Params;

const OP_GELU_ERF: u32 = 0;
const OP_GELU_TANH: u32 = 1;
const OP_TANH: u32 = 2;
const OP_SIGMOID: u32 = 3;
const OP_RELU: u32 = 4;
const OP_ADD: u32 = 16;

/// WGSL's `sign`: 0 at ±0 (unlike `f32::signum`).
fn sign(x: f32) -> f32 {
    if x > 0.0 {
        1.0
    } else if x < 0.0 {
        -1.0
    } else {
        0.0
    }
}

/// erf by Abramowitz & Stegun 7.1.26 (|error| ≤ 1.5e-7), as the WGSL computes it.
fn erf(x: f32) -> f32 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.3275911 * z);
    let poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
    sign(x) * (1.0 - poly * (-z * z).exp())
}


/// y[i] = f(x[i]) for i < n.
#[inline(always)]
fn map(x: &[f32], y: &mut [f32], n: usize, f: impl Fn(f32) -> f32) {
    for (y, &x) in y.iter_mut().zip(x).take(n) {
        *y = f(x);
    }
}

/// x [n] → y [n] = f(x) for the function of `op`: GELU (erf), GELU (tanh), tanh, sigmoid,
/// ReLU, and any other code x·scalar (the WGSL's default case).
pub(crate) fn unary(call: &mut HostCall<'_>) -> Result<()> {
    let p: Params = call.params()?;
    let (x, y) = (call.read(0)?, call.write(2)?);
    let n = p.n as usize;
    if x.len() < n || y.len() < n {
        return Err(call.fault(format!("{n} elements do not fit the bindings")));
    }
    match p.op {
        OP_GELU_ERF => map(x, y, n, |x| 0.5 * x * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2))),
        OP_GELU_TANH => map(x, y, n, |x| 0.5 * x * (1.0 + safe_tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))),
        OP_TANH => map(x, y, n, safe_tanh),
        OP_SIGMOID => map(x, y, n, |x| 1.0 / (1.0 + (-x).exp())),
        OP_RELU => map(x, y, n, |x| x.max(0.0)),
        _ => {
            let s = p.scalar;
            map(x, y, n, |x| x * s)
        }
    }
    Ok(())
}

/// a [n], b [b_len] → y [n] = a ∘ b with b repeated (i % b_len): a + b for OP_ADD, a·b for any
/// other code (as the WGSL's `select`).
pub(crate) fn binary(call: &mut HostCall<'_>) -> Result<()> {
    let p: Params = call.params()?;
    let (a, b, y) = (call.read(0)?, call.read(1)?, call.write(2)?);
    let (n, b_len) = (p.n as usize, p.b_len as usize);
    if n == 0 {
        return Ok(());
    }
    if b_len == 0 || b.len() < b_len || a.len() < n || y.len() < n {
        return Err(call.fault(format!("{n} elements and {b_len} of b do not fit the bindings")));
    }
    let b = &b[..b_len];
    let blocks = y[..n].chunks_mut(b_len).zip(a[..n].chunks(b_len));
    if p.op == OP_ADD {
        for (y, a) in blocks {
            for ((y, &a), &b) in y.iter_mut().zip(a).zip(b) {
                *y = a + b;
            }
        }
    } else {
        for (y, a) in blocks {
            for ((y, &a), &b) in y.iter_mut().zip(a).zip(b) {
                *y = a * b;
            }
        }
    }
    Ok(())
}
