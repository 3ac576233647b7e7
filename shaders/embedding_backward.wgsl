// Backward of an embedding lookup into one table: grad[row, c] += Σ d_out[t, c] over the tokens
// t whose id is `row`. The host groups the token indices by id (`rows`: the distinct ids,
// `offsets`: where each id's run of token indices starts in `tokens`), so one invocation owns
// one (distinct id, column) and sums its run: owner-computes, no atomics, O(tokens × C).
// A table over the binding limit is bound in row chunks: `grad` then holds rows
// row_start.., and the host passes only the ids that fall in the chunk.

struct Params {
    n: u32,          // distinct ids × cols
    cols: u32,
    row_start: u32,
    _pad: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> d_out: array<f32>;        // (tokens, C)
@group(0) @binding(2) var<storage, read> rows: array<u32>;         // (distinct)
@group(0) @binding(3) var<storage, read> offsets: array<u32>;      // (distinct + 1)
@group(0) @binding(4) var<storage, read> tokens: array<u32>;       // (tokens), grouped by id
@group(0) @binding(5) var<storage, read_write> grad: array<f32>;   // (chunk rows, C)

@compute @workgroup_size(256)
fn embedding_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                      @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = (wid.x + wid.y * nwg.x) * 256u + lid.x;
    if i >= p.n {
        return;
    }
    let u = i / p.cols;
    let c = i % p.cols;
    var s = 0.0;
    for (var k = offsets[u]; k < offsets[u + 1u]; k++) {
        s += d_out[tokens[k] * p.cols + c];
    }
    grad[(rows[u] - p.row_start) * p.cols + c] += s;
}
