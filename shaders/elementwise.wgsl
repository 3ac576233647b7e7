// Element-wise ops. `unary`: y = f(x) for the function selected by `op`; `unary_backward`:
// dx = dy·f'(x) (a = x, b = dy); `binary`: y = a ∘ b with b broadcast by repetition (b's shape
// is a suffix of a's, e.g. a bias row).

struct Params {
    n: u32,       // elements of x / a / y
    b_len: u32,   // elements of b (binary only)
    op: u32,      // see the OP_* constants
    scalar: f32,  // the factor of OP_SCALE
}

const OP_GELU_ERF: u32 = 0u;
const OP_GELU_TANH: u32 = 1u;
const OP_TANH: u32 = 2u;
const OP_SIGMOID: u32 = 3u;
const OP_RELU: u32 = 4u;
const OP_SCALE: u32 = 5u;
const OP_ADD: u32 = 16u;
const OP_MUL: u32 = 17u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<f32>;        // (n)
@group(0) @binding(2) var<storage, read> b: array<f32>;        // (b_len), binary only
@group(0) @binding(3) var<storage, read_write> y: array<f32>;  // (n)

// erf by Abramowitz & Stegun 7.1.26 (|error| ≤ 1.5e-7); WGSL has no erf.
fn erf(x: f32) -> f32 {
    let z = abs(x);
    let t = 1.0 / (1.0 + 0.3275911 * z);
    let poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
    return sign(x) * (1.0 - poly * exp(-z * z));
}

// tanh clamped to where it is ±1 in f32: some drivers compute tanh through exp and overflow.
fn safe_tanh(x: f32) -> f32 {
    return tanh(clamp(x, -15.0, 15.0));
}

fn apply(op: u32, x: f32) -> f32 {
    switch op {
        case OP_GELU_ERF: { return 0.5 * x * (1.0 + erf(x * 0.7071067811865476)); }
        case OP_GELU_TANH: { return 0.5 * x * (1.0 + safe_tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }
        case OP_TANH: { return safe_tanh(x); }
        case OP_SIGMOID: { return 1.0 / (1.0 + exp(-x)); }
        case OP_RELU: { return max(x, 0.0); }
        default: { return x * p.scalar; }
    }
}

// f'(x) of the function selected by `op`.
fn derivative(op: u32, x: f32) -> f32 {
    switch op {
        case OP_GELU_ERF: {
            // Φ(x) + x·φ(x)
            return 0.5 * (1.0 + erf(x * 0.7071067811865476)) + x * 0.3989422804014327 * exp(-0.5 * x * x);
        }
        case OP_GELU_TANH: {
            let t = safe_tanh(0.7978845608028654 * (x + 0.044715 * x * x * x));
            return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * 0.7978845608028654 * (1.0 + 0.134145 * x * x);
        }
        case OP_TANH: { let t = safe_tanh(x); return 1.0 - t * t; }
        case OP_SIGMOID: { let s = 1.0 / (1.0 + exp(-x)); return s * (1.0 - s); }
        case OP_RELU: { return select(0.0, 1.0, x > 0.0); }
        default: { return p.scalar; }
    }
}

fn index(wid: vec3<u32>, nwg: vec3<u32>, lid: vec3<u32>) -> u32 {
    return (wid.x + wid.y * nwg.x) * 256u + lid.x;
}

@compute @workgroup_size(256)
fn unary(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
         @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = index(wid, nwg, lid);
    if i < p.n {
        y[i] = apply(p.op, a[i]);
    }
}

@compute @workgroup_size(256)
fn unary_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = index(wid, nwg, lid);
    if i < p.n {
        y[i] = b[i] * derivative(p.op, a[i]);
    }
}

@compute @workgroup_size(256)
fn binary(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = index(wid, nwg, lid);
    if i < p.n {
        let rhs = b[i % p.b_len];
        y[i] = select(a[i] * rhs, a[i] + rhs, p.op == OP_ADD);
    }
}
