// ELMo's character CNN for one filter width: a valid 1-D convolution over each token's
// characters, max-pooled over positions, then the activation (AllenNLP's order: conv + bias,
// max, activation). One invocation per (token n, filter f); it writes column col_offset + f of
// a shared output row, so the dispatches of several widths fill one [N, Σ F] tensor.

struct Params {
    tokens: u32,      // N
    chars: u32,       // L, characters per token
    embed: u32,       // E
    filters: u32,     // F of this width
    width: u32,       // w ≤ L
    out_stride: u32,  // Σ F over all widths
    col_offset: u32,  // first output column of this width
    activation: u32,  // ACT_*
}

const ACT_TANH: u32 = 0u;
const ACT_RELU: u32 = 1u;
const WG: u32 = 64u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;           // (N, L, E)
@group(0) @binding(2) var<storage, read> weight: array<f32>;      // (F, E, w)
@group(0) @binding(3) var<storage, read> bias: array<f32>;        // (F)
@group(0) @binding(4) var<storage, read_write> out: array<f32>;   // (N, out_stride)

@compute @workgroup_size(64)
fn char_cnn(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = (wid.x + wid.y * nwg.x) * WG + lid.x;
    if i >= p.tokens * p.filters {
        return;
    }
    let n = i / p.filters;
    let f = i % p.filters;
    let x_base = n * p.chars * p.embed;
    let w_base = f * p.embed * p.width;
    var best = -3.0e38;
    for (var pos = 0u; pos + p.width <= p.chars; pos++) {
        var acc = 0.0;
        for (var e = 0u; e < p.embed; e++) {
            for (var k = 0u; k < p.width; k++) {
                acc += x[x_base + (pos + k) * p.embed + e] * weight[w_base + e * p.width + k];
            }
        }
        best = max(best, acc);
    }
    // The bias is the same at every position: adding it after the max gives the same value.
    best += bias[f];
    var y = max(best, 0.0);
    if p.activation == ACT_TANH {
        y = tanh(clamp(best, -15.0, 15.0));  // clamped: some drivers compute tanh through exp
    }
    out[n * p.out_stride + p.col_offset + f] = y;
}
