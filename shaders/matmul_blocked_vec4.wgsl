// Batched C = A·B and C = A·Bᵀ (+ bias) for CPU adapters when the operands' rows are
// 16-byte aligned: each invocation owns a 4×8 block of C in registers and reads A and B as
// vec4 along their contiguous dimension — one 16-byte load where matmul_blocked.wgsl needs
// four scalar gathers. No workgroup memory, no barriers. (On lavapipe 4×8 blocks measured
// 18 GFLOP/s at 1024³ where 4×4 gave 14.7.)
//
// Lengths and strides here count vec4s: k4 = K/4, and b's row length is n/4 (A·B) or k4 (A·Bᵀ).

// store() comes from matmul_store.wgsl, prepended to this file.

struct Params {
    m: u32, n: u32, k4: u32, has_bias: u32,
    a_bs: u32, b_bs: u32, c_bs: u32, c_rs: u32,
    c_off: u32, accumulate: u32, _pad1: u32, _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<vec4<f32>>;    // (batch | 1, M, K/4)
@group(0) @binding(2) var<storage, read> b: array<vec4<f32>>;    // (batch | 1, K, N/4) or (…, N, K/4)
@group(0) @binding(3) var<storage, read> bias: array<f32>;       // (c_off + N), if has_bias
@group(0) @binding(4) var<storage, read_write> c: array<f32>;    // (batch, M, c_rs): columns c_off..c_off + N

// C = A·B: N must be a multiple of 4. Each invocation owns 4 rows × 8 columns (two vec4s),
// so each A value loaded feeds 8 multiply-adds.
@compute @workgroup_size(8, 8, 1)
fn matmul_nn(@builtin(global_invocation_id) gid: vec3<u32>) {
    let row0 = gid.y * 4u;
    let col0 = gid.x * 8u;
    if row0 >= p.m || col0 >= p.n {
        return;
    }
    let batch = gid.z;
    let n4 = p.n / 4u;
    // The second vec4 column is clamped at the edge (computed, then dropped by store()).
    let b_col0 = batch * p.b_bs + gid.x * 2u;
    let b_col1 = batch * p.b_bs + min(gid.x * 2u + 1u, n4 - 1u);
    var a_row: array<u32, 4>;
    for (var i = 0u; i < 4u; i++) {
        a_row[i] = batch * p.a_bs + min(row0 + i, p.m - 1u) * p.k4;
    }
    var acc0: array<vec4<f32>, 4>;
    var acc1: array<vec4<f32>, 4>;
    for (var kk = 0u; kk < p.k4; kk++) {
        let r = kk * 4u * n4;
        let b00 = b[b_col0 + r];
        let b01 = b[b_col0 + r + n4];
        let b02 = b[b_col0 + r + 2u * n4];
        let b03 = b[b_col0 + r + 3u * n4];
        let b10 = b[b_col1 + r];
        let b11 = b[b_col1 + r + n4];
        let b12 = b[b_col1 + r + 2u * n4];
        let b13 = b[b_col1 + r + 3u * n4];
        for (var i = 0u; i < 4u; i++) {
            let ai = a[a_row[i] + kk];
            acc0[i] += ai.x * b00 + ai.y * b01 + ai.z * b02 + ai.w * b03;
            acc1[i] += ai.x * b10 + ai.y * b11 + ai.z * b12 + ai.w * b13;
        }
    }
    store(batch, row0, col0, acc0);
    store(batch, row0, col0 + 4u, acc1);
}

// C = A·Bᵀ with B stored (N, K), as a linear layer's weight. Each invocation owns 4 rows ×
// 8 columns.
@compute @workgroup_size(8, 8, 1)
fn matmul_nt(@builtin(global_invocation_id) gid: vec3<u32>) {
    let row0 = gid.y * 4u;
    let col0 = gid.x * 8u;
    if row0 >= p.m || col0 >= p.n {
        return;
    }
    let batch = gid.z;
    var a_row: array<u32, 4>;
    var b_row: array<u32, 8>;
    for (var i = 0u; i < 4u; i++) {
        a_row[i] = batch * p.a_bs + min(row0 + i, p.m - 1u) * p.k4;
    }
    for (var j = 0u; j < 8u; j++) {
        b_row[j] = batch * p.b_bs + min(col0 + j, p.n - 1u) * p.k4;
    }
    var acc0: array<vec4<f32>, 4>;
    var acc1: array<vec4<f32>, 4>;
    for (var kk = 0u; kk < p.k4; kk++) {
        let b0 = b[b_row[0] + kk];
        let b1 = b[b_row[1] + kk];
        let b2 = b[b_row[2] + kk];
        let b3 = b[b_row[3] + kk];
        let b4 = b[b_row[4] + kk];
        let b5 = b[b_row[5] + kk];
        let b6 = b[b_row[6] + kk];
        let b7 = b[b_row[7] + kk];
        for (var i = 0u; i < 4u; i++) {
            let ai = a[a_row[i] + kk];
            acc0[i] += vec4(dot(ai, b0), dot(ai, b1), dot(ai, b2), dot(ai, b3));
            acc1[i] += vec4(dot(ai, b4), dot(ai, b5), dot(ai, b6), dot(ai, b7));
        }
    }
    store(batch, row0, col0, acc0);
    store(batch, row0, col0 + 4u, acc1);
}
