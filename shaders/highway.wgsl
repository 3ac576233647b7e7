// The combine step of an AllenNLP Highway layer, after proj = x·Wᵀ + b (a matmul):
// out = gate·x + (1 − gate)·f(nonlinear) with nonlinear = proj[:, 0:d], gate = σ(proj[:, d:2d]),
// and its backward: from d_out, the gradients of proj (both halves) and the direct part of
// dx (gate·d_out; the host adds d_proj·W). One invocation per output element.

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

// Bindings of highway_backward (x and proj as above).
@group(0) @binding(3) var<storage, read> d_out: array<f32>;             // (N, d)
@group(0) @binding(4) var<storage, read_write> d_proj: array<f32>;      // (N, 2d)
@group(0) @binding(5) var<storage, read_write> dx_direct: array<f32>;   // (N, d)

fn activate(pre: f32) -> f32 {
    if p.activation == ACT_TANH {
        return tanh(clamp(pre, -15.0, 15.0));  // clamped: some drivers compute tanh through exp
    }
    return max(pre, 0.0);
}

fn gate_at(row: u32, col: u32) -> f32 {
    return 1.0 / (1.0 + exp(-proj[row * 2u * p.dim + p.dim + col]));
}

@compute @workgroup_size(256)
fn highway(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = (wid.x + wid.y * nwg.x) * WG + lid.x;
    if i >= p.rows * p.dim {
        return;
    }
    let row = i / p.dim;
    let col = i % p.dim;
    let gate = gate_at(row, col);
    out[i] = gate * x[i] + (1.0 - gate) * activate(proj[row * 2u * p.dim + col]);
}

@compute @workgroup_size(256)
fn highway_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                    @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = (wid.x + wid.y * nwg.x) * WG + lid.x;
    if i >= p.rows * p.dim {
        return;
    }
    let row = i / p.dim;
    let col = i % p.dim;
    let pre = proj[row * 2u * p.dim + col];
    let nonlinear = activate(pre);
    let gate = gate_at(row, col);
    var slope = select(0.0, 1.0, pre > 0.0);
    if p.activation == ACT_TANH {
        slope = 1.0 - nonlinear * nonlinear;
    }
    let d = d_out[i];
    d_proj[row * 2u * p.dim + col] = d * (1.0 - gate) * slope;
    d_proj[row * 2u * p.dim + p.dim + col] = d * (x[i] - nonlinear) * gate * (1.0 - gate);
    dx_direct[i] = d * gate;
}
