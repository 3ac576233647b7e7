//! Params, kernel declarations and host twins of `shaders/elementwise.wgsl` (`ops::elementwise`): `unary`, `unary_backward`
//! and `binary`, with the WGSL's formulas (its erf approximation and clamped tanh), so
//! that both devices compute the same functions. The GELUs run in four lanes, with a
//! polynomial exp (simd.rs) in place of the WGSL's exp.

// The WGSL's constants, digit for digit.
#![allow(clippy::excessive_precision)]

use super::activations::safe_tanh;
use super::simd::{exp, F32x4};
use super::{each_chunk, pieces, HostCall, MIN_SPLIT_VALUES};
use super::{kernel_params, Access, Kernel, KernelParams};
use crate::error::Result;
const SOURCE: &str = include_str!(concat!(env!("OUT_DIR"), "/elementwise.wgsl"));

const BINDINGS: &[Access] = &[Access::Read, Access::Read, Access::ReadWrite];

pub(crate) const UNARY: Kernel =
    Kernel { shader: "elementwise", source: SOURCE, entry: "unary", bindings: BINDINGS, params: Params::LAYOUT, twin: Some(unary) };

pub(crate) const UNARY_BACKWARD: Kernel =
    Kernel { shader: "elementwise", source: SOURCE, entry: "unary_backward", bindings: BINDINGS, params: Params::LAYOUT, twin: Some(unary_backward) };

pub(crate) const BINARY: Kernel =
    Kernel { shader: "elementwise", source: SOURCE, entry: "binary", bindings: BINDINGS, params: Params::LAYOUT, twin: Some(binary) };

/// Every kernel of this module, for the checks over all kernels (`kernels::all`).
#[cfg(test)]
pub(crate) const KERNELS: &[&Kernel] = &[&UNARY, &UNARY_BACKWARD, &BINARY];

kernel_params! {
    pub(crate) struct Params {
        pub n: u32,
        pub b_len: u32,
        pub op: u32,
        pub scalar: f32,
    }
}

const OP_GELU_ERF: u32 = 0;
const OP_GELU_TANH: u32 = 1;
const OP_TANH: u32 = 2;
const OP_SIGMOID: u32 = 3;
const OP_RELU: u32 = 4;
const OP_ADD: u32 = 16;

/// erf by Abramowitz & Stegun 7.1.26 (|error| ≤ 1.5e-7), the WGSL's formula, in four lanes.
/// At ±0 it gives ±1e-9 where the WGSL's sign() gives 0; GELU multiplies it by x.
#[inline(always)]
fn erf4(x: F32x4) -> F32x4 {
    let one = F32x4::splat(1.0);
    let z = x.abs();
    let t = one.div(one.add(F32x4::splat(0.3275911).mul(z)));
    let mut poly = F32x4::splat(1.061405429);
    for c in [-1.453152027, 1.421413741, -0.284496736, 0.254829592] {
        poly = F32x4::splat(c).mul_add(poly, t);
    }
    one.sub(poly.mul(t).mul(exp(F32x4::zero().sub(z.mul(z))))).with_sign_of(x)
}

/// `safe_tanh` in four lanes: sign(y)·(1 − 2 / (e^{2|y|} + 1)) for y clamped to ±15.
#[inline(always)]
fn tanh4(y: F32x4) -> F32x4 {
    let one = F32x4::splat(1.0);
    let e = exp(y.clamp(-15.0, 15.0).abs().mul(F32x4::splat(2.0)));
    one.sub(F32x4::splat(2.0).div(e.add(one))).with_sign_of(y)
}

/// y[i] = f(x[i]) for i < n, four at a time (the last few padded with zeros).
#[inline(always)]
fn map4(x: &[f32], y: &mut [f32], n: usize, f: impl Fn(F32x4) -> F32x4) {
    let ((x4, x_tail), (y4, y_tail)) = (x[..n].as_chunks::<4>(), y[..n].as_chunks_mut::<4>());
    for (y, x) in y4.iter_mut().zip(x4) {
        *y = f(F32x4::load(x)).to_array();
    }
    let mut padded = [0.0f32; 4];
    padded[..x_tail.len()].copy_from_slice(x_tail);
    let done = f(F32x4::load(&padded)).to_array();
    y_tail.copy_from_slice(&done[..y_tail.len()]);
}

/// y[i] = f(x[i]) for i < n.
#[inline(always)]
fn map(x: &[f32], y: &mut [f32], n: usize, f: impl Fn(f32) -> f32) {
    for (y, &x) in y.iter_mut().zip(x).take(n) {
        *y = f(x);
    }
}

/// x [n] → y [n] = f(x) for the function of `op`: GELU (erf), GELU (tanh), tanh, sigmoid,
/// ReLU, and any other code x·scalar (the WGSL's default case). Split over the device's
/// threads in pieces of whole vectors.
pub(crate) fn unary(call: &mut HostCall<'_>) -> Result<()> {
    let p: Params = call.params()?;
    let (x, y) = (call.read(0)?, call.write(2)?);
    let n = p.n as usize;
    if x.len() < n || y.len() < n {
        return Err(call.fault(format!("{n} elements do not fit the bindings")));
    }
    let threads = call.threads();
    let size = n.div_ceil(pieces(threads, n, MIN_SPLIT_VALUES)).next_multiple_of(4);
    each_chunk(threads, &mut y[..n], size, |i, y| {
        unary_piece(&p, &x[i * size..], y);
        Ok(())
    })
}

/// y = f(x) over y's length, for `unary`.
fn unary_piece(p: &Params, x: &[f32], y: &mut [f32]) {
    let n = y.len();
    match p.op {
        // The transformers' activations, vectorized (they are about a sixth of MiniLM's time).
        OP_GELU_ERF => map4(x, y, n, |x| {
            let half_x = F32x4::splat(0.5).mul(x);
            half_x.mul_add(half_x, erf4(x.mul(F32x4::splat(std::f32::consts::FRAC_1_SQRT_2))))
        }),
        OP_GELU_TANH => map4(x, y, n, |x| {
            let half_x = F32x4::splat(0.5).mul(x);
            let cubic = F32x4::splat(0.044715).mul(x).mul(x).mul(x);
            half_x.mul_add(half_x, tanh4(F32x4::splat(0.7978845608028654).mul(x.add(cubic))))
        }),
        OP_TANH => map(x, y, n, safe_tanh),
        OP_SIGMOID => map(x, y, n, |x| 1.0 / (1.0 + (-x).exp())),
        OP_RELU => map(x, y, n, |x| x.max(0.0)),
        _ => {
            let s = p.scalar;
            map(x, y, n, |x| x * s)
        }
    }
}

/// x [n], dy [n] → dx [n] = dy·f'(x) for the function of `op` (any other code: dy·scalar);
/// the GELUs in four lanes as the forward, split over the device's threads as `unary`.
pub(crate) fn unary_backward(call: &mut HostCall<'_>) -> Result<()> {
    let p: Params = call.params()?;
    let (x, dy, dx) = (call.read(0)?, call.read(1)?, call.write(2)?);
    let n = p.n as usize;
    if x.len() < n || dy.len() < n || dx.len() < n {
        return Err(call.fault(format!("{n} elements do not fit the bindings")));
    }
    let threads = call.threads();
    let size = n.div_ceil(pieces(threads, n, MIN_SPLIT_VALUES)).next_multiple_of(4);
    each_chunk(threads, &mut dx[..n], size, |i, dx| {
        unary_backward_piece(&p, &x[i * size..], &dy[i * size..], dx);
        Ok(())
    })
}

/// dx = dy·f'(x) over dx's length, for `unary_backward`.
fn unary_backward_piece(p: &Params, x: &[f32], dy: &[f32], dx: &mut [f32]) {
    let n = dx.len();
    let (half, one) = (F32x4::splat(0.5), F32x4::splat(1.0));
    match p.op {
        // Φ(x) + x·φ(x)
        OP_GELU_ERF => map4_backward(x, dy, dx, n, |x| {
            let density = F32x4::splat(0.3989422804014327).mul(exp(F32x4::splat(-0.5).mul(x).mul(x)));
            half.mul_add(half, erf4(x.mul(F32x4::splat(std::f32::consts::FRAC_1_SQRT_2)))).add(x.mul(density))
        }),
        // ½(1 + t) + ½x(1 − t²)·c(1 + 3·0.044715·x²), t = tanh(c(x + 0.044715x³))
        OP_GELU_TANH => map4_backward(x, dy, dx, n, |x| {
            let c = F32x4::splat(0.7978845608028654);
            let t = tanh4(c.mul(x.add(F32x4::splat(0.044715).mul(x).mul(x).mul(x))));
            let slope = c.mul(one.add(F32x4::splat(0.134145).mul(x).mul(x)));
            half.mul(one.add(t)).add(half.mul(x).mul(one.sub(t.mul(t))).mul(slope))
        }),
        OP_TANH => map_backward(x, dy, dx, n, |x| {
            let t = safe_tanh(x);
            1.0 - t * t
        }),
        OP_SIGMOID => map_backward(x, dy, dx, n, |x| {
            let s = 1.0 / (1.0 + (-x).exp());
            s * (1.0 - s)
        }),
        OP_RELU => map_backward(x, dy, dx, n, |x| f32::from(x > 0.0)),
        _ => {
            let s = p.scalar;
            map_backward(x, dy, dx, n, |_| s)
        }
    }
}

/// dx[i] = dy[i]·f'(x[i]) for i < n, four at a time (the last few padded with zeros).
#[inline(always)]
fn map4_backward(x: &[f32], dy: &[f32], dx: &mut [f32], n: usize, derivative: impl Fn(F32x4) -> F32x4) {
    let ((x4, x_tail), (dy4, dy_tail), (dx4, dx_tail)) = (x[..n].as_chunks::<4>(), dy[..n].as_chunks::<4>(), dx[..n].as_chunks_mut::<4>());
    for ((dx, x), dy) in dx4.iter_mut().zip(x4).zip(dy4) {
        *dx = F32x4::load(dy).mul(derivative(F32x4::load(x))).to_array();
    }
    let (mut x_padded, mut dy_padded) = ([0.0f32; 4], [0.0f32; 4]);
    x_padded[..x_tail.len()].copy_from_slice(x_tail);
    dy_padded[..dy_tail.len()].copy_from_slice(dy_tail);
    let done = F32x4::load(&dy_padded).mul(derivative(F32x4::load(&x_padded))).to_array();
    dx_tail.copy_from_slice(&done[..dx_tail.len()]);
}

/// dx[i] = dy[i]·f'(x[i]) for i < n.
#[inline(always)]
fn map_backward(x: &[f32], dy: &[f32], dx: &mut [f32], n: usize, derivative: impl Fn(f32) -> f32) {
    for ((dx, &x), &dy) in dx[..n].iter_mut().zip(&x[..n]).zip(&dy[..n]) {
        *dx = dy * derivative(x);
    }
}

/// a [n], b [b_len] → y [n] = a ∘ b with b repeated (i % b_len): a + b for OP_ADD, a·b for any
/// other code (as the WGSL's `select`). Split over the device's threads in pieces of whole
/// repeats of b.
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
    let threads = call.threads();
    let size = n.div_ceil(pieces(threads, n, MIN_SPLIT_VALUES)).next_multiple_of(b_len);
    each_chunk(threads, &mut y[..n], size, |i, y| {
        let blocks = y.chunks_mut(b_len).zip(a[i * size..].chunks(b_len));
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
    })
}
