// ELMo's scalar mix (Peters et al. 2018, eq. 1) of L layers: out[b, n] = γ · Σ_j w_j · x[b, j, n]
// with w = softmax(s). Every invocation computes w itself from the L scalars (L is small).
// `mix`: one invocation per output element. `mix_backward`: one workgroup owns the gradients
// of s and γ: for each layer it reduces g_j = Σ_{b,n} d_out[b, n] · x[b, j, n], then
// invocation 0 adds dγ = Σ_j w_j g_j and ds_j = γ · w_j · (g_j − Σ_k w_k g_k) (no atomics).

// workgroup_sum comes from reduce.wgsl, prepended to this file.

struct Params {
    batch: u32,
    layers: u32,
    width: u32,
    _pad: u32,
}

const WG: u32 = 256u;
// The most layers a mix takes (checked on the host).
const MAX_LAYERS: u32 = 32u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;               // (batch, layers, width)
@group(0) @binding(2) var<storage, read> s: array<f32>;               // (layers)
@group(0) @binding(3) var<storage, read> gamma: array<f32>;           // (1)
// mix
@group(0) @binding(4) var<storage, read_write> out: array<f32>;       // (batch, width)
// mix_backward
@group(0) @binding(4) var<storage, read> d_out: array<f32>;           // (batch, width)
@group(0) @binding(5) var<storage, read_write> d_s: array<f32>;       // (layers)
@group(0) @binding(6) var<storage, read_write> d_gamma: array<f32>;   // (1)

// softmax(s), in the first p.layers entries.
fn layer_weights() -> array<f32, MAX_LAYERS> {
    var w: array<f32, MAX_LAYERS>;
    var top = s[0];
    for (var k = 1u; k < p.layers; k++) {
        top = max(top, s[k]);
    }
    var total = 0.0;
    for (var k = 0u; k < p.layers; k++) {
        w[k] = exp(s[k] - top);
        total += w[k];
    }
    for (var k = 0u; k < p.layers; k++) {
        w[k] /= total;
    }
    return w;
}

@compute @workgroup_size(256)
fn mix(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = (wid.x + wid.y * groups.x) * WG + lid;
    if i >= p.batch * p.width {
        return;
    }
    let b = i / p.width;
    let n = i % p.width;
    let w = layer_weights();
    var sum = 0.0;
    for (var j = 0u; j < p.layers; j++) {
        sum += w[j] * x[(b * p.layers + j) * p.width + n];
    }
    out[i] = gamma[0] * sum;
}

var<workgroup> layer_grads: array<f32, MAX_LAYERS>;

@compute @workgroup_size(256)
fn mix_backward(@builtin(local_invocation_index) t: u32) {
    let elements = p.batch * p.width;
    for (var j = 0u; j < p.layers; j++) {
        var g = 0.0;
        for (var i = t; i < elements; i += WG) {
            let b = i / p.width;
            g += d_out[i] * x[(b * p.layers + j) * p.width + i % p.width];
        }
        let total = workgroup_sum(t, g);
        if t == 0u {
            layer_grads[j] = total;
        }
    }
    if t == 0u {
        let w = layer_weights();
        var mean = 0.0;  // Σ_k w_k g_k, which is also dγ
        for (var k = 0u; k < p.layers; k++) {
            mean += w[k] * layer_grads[k];
        }
        for (var j = 0u; j < p.layers; j++) {
            d_s[j] += gamma[0] * w[j] * (layer_grads[j] - mean);
        }
        d_gamma[0] += mean;
    }
}
