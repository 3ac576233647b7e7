//! Params, kernel declarations and host twins of `shaders/elementwise.wgsl` (`ops::elementwise`): `unary`, `unary_backward`
//! and `binary`, with the WGSL's formulas (its erf approximation and clamped tanh), so
//! that both devices compute the same functions. The GELUs run in vectors (natively eight lanes
//! with FMA where the CPU has AVX2, sixteen with AVX-512), with a polynomial exp (simd.rs) in
//! place of the WGSL's exp.

// The WGSL's constants, digit for digit.
#![allow(clippy::excessive_precision)]

use super::activations::safe_tanh;
use super::simd::{exp, widest, Lanes, OverLanes, MAX_WIDTH};
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

/// erf by Abramowitz & Stegun 7.1.26 (|error| ≤ 1.5e-7), the WGSL's formula, in each lane.
/// At ±0 it gives ±1e-9 where the WGSL's sign() gives 0; GELU multiplies it by x.
#[inline(always)]
fn erf<L: Lanes>(x: L) -> L {
    let one = L::splat(1.0);
    let z = x.abs();
    let t = one.div(one.add(L::splat(0.3275911).mul(z)));
    let mut poly = L::splat(1.061405429);
    for c in [-1.453152027, 1.421413741, -0.284496736, 0.254829592] {
        poly = L::splat(c).mul_add(poly, t);
    }
    one.sub(poly.mul(t).mul(exp(L::zero().sub(z.mul(z))))).with_sign_of(x)
}

/// `safe_tanh` in each lane: sign(y)·(1 − 2 / (e^{2|y|} + 1)) for y clamped to ±15.
#[inline(always)]
fn tanh<L: Lanes>(y: L) -> L {
    let one = L::splat(1.0);
    let e = exp(y.clamp(-15.0, 15.0).abs().mul(L::splat(2.0)));
    one.sub(L::splat(2.0).div(e.add(one))).with_sign_of(y)
}

/// An activation and its derivative over any lanes (`#[inline(always)]` associated functions,
/// not closures: a closure would be compiled apart from the wide path's AVX2 function, its
/// intrinsics left as calls).
trait Activation {
    fn value<L: Lanes>(x: L) -> L;
    fn slope<L: Lanes>(x: L) -> L;
}

/// GELU with the exact normal CDF (BERT's `gelu`).
struct GeluErf;

impl Activation for GeluErf {
    /// ½x·(1 + erf(x/√2)).
    #[inline(always)]
    fn value<L: Lanes>(x: L) -> L {
        let half_x = L::splat(0.5).mul(x);
        half_x.mul_add(half_x, erf(x.mul(L::splat(std::f32::consts::FRAC_1_SQRT_2))))
    }

    /// Φ(x) + x·φ(x).
    #[inline(always)]
    fn slope<L: Lanes>(x: L) -> L {
        let half = L::splat(0.5);
        let density = L::splat(0.3989422804014327).mul(exp(L::splat(-0.5).mul(x).mul(x)));
        half.mul_add(half, erf(x.mul(L::splat(std::f32::consts::FRAC_1_SQRT_2)))).add(x.mul(density))
    }
}

/// GELU's tanh approximation (GPT-2's `gelu_new`), c = √(2/π).
struct GeluTanh;

impl Activation for GeluTanh {
    /// ½x·(1 + tanh(c(x + 0.044715x³))).
    #[inline(always)]
    fn value<L: Lanes>(x: L) -> L {
        let half_x = L::splat(0.5).mul(x);
        let cubic = L::splat(0.044715).mul(x).mul(x).mul(x);
        half_x.mul_add(half_x, tanh(L::splat(0.7978845608028654).mul(x.add(cubic))))
    }

    /// ½(1 + t) + ½x(1 − t²)·c(1 + 3·0.044715·x²), t = tanh(c(x + 0.044715x³)).
    #[inline(always)]
    fn slope<L: Lanes>(x: L) -> L {
        let (half, one, c) = (L::splat(0.5), L::splat(1.0), L::splat(0.7978845608028654));
        let t = tanh(c.mul(x.add(L::splat(0.044715).mul(x).mul(x).mul(x))));
        let slope = c.mul(one.add(L::splat(0.134145).mul(x).mul(x)));
        half.mul(one.add(t)).add(half.mul(x).mul(one.sub(t.mul(t))).mul(slope))
    }
}

/// A piece of a GELU (erf or tanh), forward (`out` = f(x)) or backward (`out` = dy·f'(x)),
/// at the widest lanes the CPU has (the transformers' activations: about a sixth of MiniLM's
/// time).
struct Gelu<'a> {
    erf: bool,
    x: &'a [f32],
    dy: Option<&'a [f32]>,
    out: &'a mut [f32],
}

impl OverLanes for Gelu<'_> {
    type Output = ();

    #[inline(always)]
    fn run<L: Lanes>(self) {
        let Gelu { erf, x, dy, out } = self;
        match (erf, dy) {
            (true, None) => map_lanes::<L, GeluErf>(x, out),
            (false, None) => map_lanes::<L, GeluTanh>(x, out),
            (true, Some(dy)) => map_lanes_backward::<L, GeluErf>(x, dy, out),
            (false, Some(dy)) => map_lanes_backward::<L, GeluTanh>(x, dy, out),
        }
    }
}

/// y[i] = F(x[i]) over y's length, a vector at a time (the last few padded with zeros).
#[inline(always)]
fn map_lanes<L: Lanes, F: Activation>(x: &[f32], y: &mut [f32]) {
    let whole = y.len() - y.len() % L::WIDTH;
    for (y, x) in y[..whole].chunks_exact_mut(L::WIDTH).zip(x.chunks_exact(L::WIDTH)) {
        F::value(L::read(x)).write(y);
    }
    let tail = y.len() - whole;
    let mut padded = [0.0f32; MAX_WIDTH];
    padded[..tail].copy_from_slice(&x[whole..][..tail]);
    F::value(L::read(&padded)).write(&mut padded);
    y[whole..].copy_from_slice(&padded[..tail]);
}

/// dx[i] = dy[i]·F'(x[i]) over dx's length, a vector at a time (the last few padded with zeros).
#[inline(always)]
fn map_lanes_backward<L: Lanes, F: Activation>(x: &[f32], dy: &[f32], dx: &mut [f32]) {
    let whole = dx.len() - dx.len() % L::WIDTH;
    for ((dx, x), dy) in dx[..whole].chunks_exact_mut(L::WIDTH).zip(x.chunks_exact(L::WIDTH)).zip(dy.chunks_exact(L::WIDTH)) {
        L::read(dy).mul(F::slope(L::read(x))).write(dx);
    }
    let tail = dx.len() - whole;
    let (mut x_padded, mut dy_padded) = ([0.0f32; MAX_WIDTH], [0.0f32; MAX_WIDTH]);
    x_padded[..tail].copy_from_slice(&x[whole..][..tail]);
    dy_padded[..tail].copy_from_slice(&dy[whole..][..tail]);
    L::read(&dy_padded).mul(F::slope(L::read(&x_padded))).write(&mut dy_padded);
    dx[whole..].copy_from_slice(&dy_padded[..tail]);
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
    let size = n.div_ceil(pieces(threads, n, MIN_SPLIT_VALUES)).next_multiple_of(MAX_WIDTH);
    each_chunk(threads, &mut y[..n], size, |i, y| {
        unary_piece(&p, &x[i * size..], y);
        Ok(())
    })
}

/// y = f(x) over y's length, for `unary`.
fn unary_piece(p: &Params, x: &[f32], y: &mut [f32]) {
    let n = y.len();
    match p.op {
        OP_GELU_ERF | OP_GELU_TANH => widest(Gelu { erf: p.op == OP_GELU_ERF, x, dy: None, out: y }),
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
    let size = n.div_ceil(pieces(threads, n, MIN_SPLIT_VALUES)).next_multiple_of(MAX_WIDTH);
    each_chunk(threads, &mut dx[..n], size, |i, dx| {
        unary_backward_piece(&p, &x[i * size..], &dy[i * size..], dx);
        Ok(())
    })
}

/// dx = dy·f'(x) over dx's length, for `unary_backward`.
fn unary_backward_piece(p: &Params, x: &[f32], dy: &[f32], dx: &mut [f32]) {
    let n = dx.len();
    match p.op {
        OP_GELU_ERF | OP_GELU_TANH => widest(Gelu { erf: p.op == OP_GELU_ERF, x, dy: Some(dy), out: dx }),
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

#[cfg(test)]
mod tests {
    use super::super::simd::at_each_width;
    use super::*;

    /// A GELU piece into a fresh vector, for `at_each_width`.
    struct GeluIntoVec<'a> {
        erf: bool,
        x: &'a [f32],
        dy: Option<&'a [f32]>,
    }

    impl OverLanes for GeluIntoVec<'_> {
        type Output = Vec<f32>;

        fn run<L: Lanes>(self) -> Vec<f32> {
            let mut out = vec![f32::NAN; self.x.len()];
            Gelu { erf: self.erf, x: self.x, dy: self.dy, out: &mut out }.run::<L>();
            out
        }
    }

    /// The GELUs and their derivatives in f64.
    fn reference(erf: bool, backward: bool, x: f64) -> f64 {
        let c = (2.0 / std::f64::consts::PI).sqrt();
        match (erf, backward) {
            (true, false) => 0.5 * x * (1.0 + libm::erf(x / std::f64::consts::SQRT_2)),
            (true, true) => 0.5 * (1.0 + libm::erf(x / std::f64::consts::SQRT_2)) + x * (-0.5 * x * x).exp() / (2.0 * std::f64::consts::PI).sqrt(),
            (false, false) => 0.5 * x * (1.0 + (c * (x + 0.044715 * x.powi(3))).tanh()),
            (false, true) => {
                let t = (c * (x + 0.044715 * x.powi(3))).tanh();
                0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * 0.044715 * x * x)
            }
        }
    }

    #[test]
    fn gelus_and_their_derivatives_match_f64_at_each_width() {
        // Lengths around both widths' tails; values over the GELUs' curved part and past it.
        for len in [0, 1, 3, 4, 7, 8, 9, 17, 40] {
            let x: Vec<f32> = (0..len).map(|i| -7.0 + 14.0 * i as f32 / len.max(2) as f32 + 0.013).collect();
            let gradients: Vec<f32> = (0..len).map(|i| 0.5 + 0.25 * (i % 7) as f32).collect();
            for (erf, backward) in [(true, false), (true, true), (false, false), (false, true)] {
                let dy = backward.then_some(&gradients[..]);
                for (width, got) in at_each_width(|| GeluIntoVec { erf, x: &x, dy }) {
                    for (i, (&x, &got)) in x.iter().zip(&got).enumerate() {
                        let want = reference(erf, backward, x as f64) * dy.map_or(1.0, |dy| dy[i] as f64);
                        let what = format!("{width} lanes, erf {erf}, backward {backward}, len {len}, x {x}");
                        assert!((got as f64 - want).abs() <= 1e-6 * want.abs().max(1.0), "{what}: {got}, not {want}");
                    }
                }
            }
        }
    }
}
