// C [M, N] = A [M, K] · Wᵀ (+ bias) with W [N, K] quantized (quantized_common.wgsl): a linear
// layer's forward. One invocation per output column n and tile of 4 rows of A, so that each
// decoded weight serves four rows; A's columns past K read as 0 (W's padding).

@group(0) @binding(3) var<storage, read> a: array<f32>;          // (M, a_rs): columns 0..K
@group(0) @binding(4) var<storage, read> bias: array<f32>;       // (N), if has_bias
@group(0) @binding(5) var<storage, read_write> c: array<f32>;    // (M, c_rs): columns 0..N

const WG: u32 = 64u;
const ROWS: u32 = 4u;

// A[row, k..k + 4], zeros past K.
fn a4(row: u32, k: u32) -> vec4<f32> {
    let base = row * p.a_rs + k;
    var v = vec4<f32>(0.0);
    for (var j = 0u; j < 4u; j++) {
        if k + j < p.k {
            v[j] = a[base + j];
        }
    }
    return v;
}

@compute @workgroup_size(64)
fn matmul_quantized(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                    @builtin(local_invocation_id) lid: vec3<u32>) {
    // x: columns; y and z: tiles of rows (z past the per-dimension limit).
    let n = wid.x * WG + lid.x;
    let m0 = (wid.y + wid.z * nwg.y) * ROWS;
    if n >= p.n || m0 >= p.m {
        return;
    }
    let rows = min(ROWS, p.m - m0);
    var acc = vec4<f32>(0.0);
    let groups = (p.k + 7u) / 8u;
    for (var g = 0u; g < groups; g++) {
        let w = dequant8(n, g);
        for (var r = 0u; r < rows; r++) {
            acc[r] += dot(a4(m0 + r, 8u * g), w[0]) + dot(a4(m0 + r, 8u * g + 4u), w[1]);
        }
    }
    let b = select(0.0, bias[n], p.has_bias != 0u);
    for (var r = 0u; r < rows; r++) {
        c[(m0 + r) * p.c_rs + n] = acc[r] + b;
    }
}
