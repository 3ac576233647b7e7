// ELMo's character CNN for one filter width w, over a chunk of tokens n0 … n0 + tokens − 1,
// as im2col, a matmul (ops::matmul, between the two entry points here) and a max-pool:
//   im2col   (one invocation per window element):
//            windows[n·P + pos, e·w + k] = x[n0 + n, pos + k, e], P = L − w + 1 positions;
//   matmul   conv = windows · weightᵀ, weight [F, E·w] (PyTorch's Conv1d [F, E, w]);
//   max_pool (one invocation per (n, f)):
//            out[n0 + n, col_offset + f] = act(max over pos of conv[n·P + pos, f] + bias[f])
// AllenNLP's order is conv + bias, max, activation; the bias is the same at every position,
// so adding it after the max gives the same value. Each width writes its own column block of
// one [N, Σ F] output. A training forward also records the position of each max (the first
// one on ties, as torch.max), in a [N, Σ F] array laid out like the output.
// The backward, per width:
//   pool_backward (one invocation per (n, f), all tokens):
//            d_pre[n, f] = d_out[n, col_offset + f]·act'(out[n, col_offset + f]);
//   then per chunk, after im2col again:
//   route_max (one invocation per conv element): d_conv[n·P + pos, f] = d_pre[n0 + n, f] at
//            the recorded max position, else 0;
//   matmuls  dW += d_convᵀ·windows, d_windows = d_conv·W (by the host);
//   col2im   (one invocation per character element): d_chars[n0 + n, l, e] += the window
//            elements that read it, Σ over k of d_windows[n·P + l − k, e·w + k].

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
    keep_argmax: u32, // 1: max_pool records the max positions
    _pad0: u32, _pad1: u32,
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
@group(0) @binding(4) var<storage, read_write> argmax: array<u32>;    // (N, out_stride) or absent

// Bindings of pool_backward.
@group(0) @binding(1) var<storage, read> d_out: array<f32>;           // (N, out_stride)
@group(0) @binding(2) var<storage, read> out_in: array<f32>;          // (N, out_stride)
@group(0) @binding(3) var<storage, read_write> d_pre: array<f32>;     // (N, F)

// Bindings of route_max.
@group(0) @binding(1) var<storage, read> d_pre_in: array<f32>;        // (N, F)
@group(0) @binding(2) var<storage, read> argmax_in: array<u32>;       // (N, out_stride)
@group(0) @binding(3) var<storage, read_write> d_conv: array<f32>;    // (tokens·P, F)

// Bindings of col2im.
@group(0) @binding(1) var<storage, read> d_windows: array<f32>;       // (tokens·P, E·w)
@group(0) @binding(2) var<storage, read_write> d_chars: array<f32>;   // (N, L, E)

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
    var best_pos = 0u;
    for (var pos = 0u; pos < positions(); pos++) {
        let v = conv[(n * positions() + pos) * p.filters + f];
        if v > best {
            best = v;
            best_pos = pos;
        }
    }
    best += bias[f];
    var y = max(best, 0.0);
    if p.activation == ACT_TANH {
        y = tanh(clamp(best, -15.0, 15.0));  // clamped: some drivers compute tanh through exp
    }
    let at = (p.first_token + n) * p.out_stride + p.col_offset + f;
    out[at] = y;
    if p.keep_argmax != 0u {
        argmax[at] = best_pos;
    }
}

@compute @workgroup_size(64)
fn pool_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = linear_index(wid, nwg, lid);
    if i >= p.tokens * p.filters {
        return;
    }
    let at = (i / p.filters) * p.out_stride + p.col_offset + i % p.filters;
    let y = out_in[at];
    var slope = select(0.0, 1.0, y > 0.0);
    if p.activation == ACT_TANH {
        slope = 1.0 - y * y;
    }
    d_pre[i] = d_out[at] * slope;
}

@compute @workgroup_size(64)
fn route_max(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = linear_index(wid, nwg, lid);
    if i >= p.tokens * positions() * p.filters {
        return;
    }
    let row = i / p.filters;
    let f = i % p.filters;
    let n = p.first_token + row / positions();
    let pos = row % positions();
    var d = 0.0;
    if argmax_in[n * p.out_stride + p.col_offset + f] == pos {
        d = d_pre_in[n * p.filters + f];
    }
    d_conv[i] = d;
}

@compute @workgroup_size(64)
fn col2im(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = linear_index(wid, nwg, lid);
    if i >= p.tokens * p.chars * p.embed {
        return;
    }
    let n = i / (p.chars * p.embed);
    let l = (i / p.embed) % p.chars;
    let e = i % p.embed;
    let cols = p.embed * p.width;
    var sum = 0.0;
    for (var k = 0u; k < p.width; k++) {
        if l >= k && l - k < positions() {
            sum += d_windows[(n * positions() + l - k) * cols + e * p.width + k];
        }
    }
    d_chars[p.first_token * p.chars * p.embed + i] += sum;
}
