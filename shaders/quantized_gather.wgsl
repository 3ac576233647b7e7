// Rows of a quantized table (quantized_common.wgsl) as f32: out[i] = W[ids[i]], the lookup of
// a quantized embedding table. One invocation per group of 8 elements of an output row.

@group(0) @binding(3) var<storage, read> ids: array<u32>;        // (M): rows of W, each < N
@group(0) @binding(4) var<storage, read_write> out: array<f32>;  // (M, K)

const WG: u32 = 64u;

@compute @workgroup_size(64)
fn gather_quantized(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                    @builtin(local_invocation_id) lid: vec3<u32>) {
    let groups = (p.k + 7u) / 8u;
    let item = (wid.x + wid.y * nwg.x) * WG + lid.x;
    if item >= p.m * groups {
        return;
    }
    let i = item / groups;
    let g = item % groups;
    let w = dequant8(ids[i], g);
    for (var j = 0u; j < 8u; j++) {
        let col = 8u * g + j;
        if col < p.k {
            out[i * p.k + col] = w[j / 4u][j % 4u];
        }
    }
}
