// ELMo's character CNN for one filter width w, over a chunk of tokens n0 … n0 + tokens − 1,
// as im2col, a matmul (ops::matmul, between the two entry points here) and a max-pool:
//   im2col   (one invocation per window element):
//            windows[n·P + pos, e·w + k] = x[n0 + n, pos + k, e], P = L − w + 1 positions;
//   matmul   conv = windows · weightᵀ, weight [F, E·w] (PyTorch's Conv1d [F, E, w]);
//   max_pool (one invocation per (n, f)):
//            out[n0 + n, col_offset + f] = act(max over pos of conv[n·P + pos, f] + bias[f])
// AllenNLP's order is conv + bias, max, activation; the bias is the same at every position,
// so adding it after the max gives the same value. Each width writes its own column block of
// one [N, Σ F] output.

struct Params {
    tokens: u32,      // tokens in this chunk
    chars: u32,       // L, characters per token
    embed: u32,       // E
    width: u32,       // w ≤ L
    filters: u32,     // F of this width
    out_stride: u32,  // Σ F over all widths
    col_offset: u32,  // first output column of this width
    activation: u32,  // ACT_*
    first_token: u32, // n0
    _pad0: u32, _pad1: u32, _pad2: u32,
}

const ACT_TANH: u32 = 0u;
const ACT_RELU: u32 = 1u;
const WG: u32 = 64u;

@group(0) @binding(0) var<uniform> p: Params;

// Bindings of im2col.
@group(0) @binding(1) var<storage, read> x: array<f32>;               // (N, L, E)
@group(0) @binding(2) var<storage, read_write> windows: array<f32>;   // (tokens·P, E·w)

// Bindings of max_pool (the same slots, used by the other entry point only).
@group(0) @binding(1) var<storage, read> conv: array<f32>;            // (tokens·P, F)
@group(0) @binding(2) var<storage, read> bias: array<f32>;            // (F)
@group(0) @binding(3) var<storage, read_write> out: array<f32>;       // (N, out_stride)

fn linear_index(wid: vec3<u32>, nwg: vec3<u32>, lid: vec3<u32>) -> u32 {
    return (wid.x + wid.y * nwg.x) * WG + lid.x;
}

fn positions() -> u32 {
    return p.chars - p.width + 1u;
}

@compute @workgroup_size(64)
fn im2col(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = linear_index(wid, nwg, lid);
    let cols = p.embed * p.width;
    if i >= p.tokens * positions() * cols {
        return;
    }
    let row = i / cols;
    let col = i % cols;
    let n = row / positions();
    let pos = row % positions();
    let e = col / p.width;
    let k = col % p.width;
    windows[i] = x[((p.first_token + n) * p.chars + pos + k) * p.embed + e];
}

@compute @workgroup_size(64)
fn max_pool(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = linear_index(wid, nwg, lid);
    if i >= p.tokens * p.filters {
        return;
    }
    let n = i / p.filters;
    let f = i % p.filters;
    var best = -3.0e38;
    for (var pos = 0u; pos < positions(); pos++) {
        best = max(best, conv[(n * positions() + pos) * p.filters + f]);
    }
    best += bias[f];
    var y = max(best, 0.0);
    if p.activation == ACT_TANH {
        y = tanh(clamp(best, -15.0, 15.0));  // clamped: some drivers compute tanh through exp
    }
    out[(p.first_token + n) * p.out_stride + p.col_offset + f] = y;
}
