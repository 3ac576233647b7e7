// The combine step of an AllenNLP Highway layer, after proj = x·Wᵀ + b (a matmul):
// out = gate·x + (1 − gate)·f(nonlinear) with nonlinear = proj[:, 0:d], gate = σ(proj[:, d:2d]).
// One invocation per output element.

struct Params {
    rows: u32,        // N
    dim: u32,         // d
    activation: u32,  // ACT_*
    _pad: u32,
}

const ACT_TANH: u32 = 0u;
const ACT_RELU: u32 = 1u;
const WG: u32 = 256u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;           // (N, d)
@group(0) @binding(2) var<storage, read> proj: array<f32>;        // (N, 2d): nonlinear | gate
@group(0) @binding(3) var<storage, read_write> out: array<f32>;   // (N, d)

@compute @workgroup_size(256)
fn highway(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = (wid.x + wid.y * nwg.x) * WG + lid.x;
    if i >= p.rows * p.dim {
        return;
    }
    let row = i / p.dim;
    let col = i % p.dim;
    let pre = proj[row * 2u * p.dim + col];
    let gate = 1.0 / (1.0 + exp(-proj[row * 2u * p.dim + p.dim + col]));
    var nonlinear = max(pre, 0.0);
    if p.activation == ACT_TANH {
        nonlinear = tanh(clamp(pre, -15.0, 15.0));  // clamped: some drivers compute tanh through exp
    }
    out[i] = gate * x[i] + (1.0 - gate) * nonlinear;
}
