// Batched C = op(A)·op(B) (+ bias) for CPU adapters (lavapipe, SwiftShader): each invocation
// owns a 4×4 block of C and keeps it in registers; no workgroup memory, no barriers (on a
// CPU adapter invocations are SIMD lanes, and barriers are costly).
//
// Operands are read through strides, which covers the transposed forms; C may be a column
// block of a wider matrix (row stride c_rs, first column c_off) when B is split into chunks.
//
//   A(r, k) = a[batch·a_bs + r·a_rs + k·a_cs],  B(k, c) = b[batch·b_bs + k·b_rs + c·b_cs].

// store() comes from matmul_store.wgsl, prepended to this file.

struct Params {
    m: u32, n: u32, k: u32, has_bias: u32,
    a_rs: u32, a_cs: u32, a_bs: u32, c_bs: u32,
    b_rs: u32, b_cs: u32, b_bs: u32, c_rs: u32,
    c_off: u32, accumulate: u32, _pad1: u32, _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<f32>;          // (batch | 1, M, K) or (…, K, M)
@group(0) @binding(2) var<storage, read> b: array<f32>;          // (batch | 1, K, N) or (…, N, K)
@group(0) @binding(3) var<storage, read> bias: array<f32>;       // (c_off + N), if has_bias
@group(0) @binding(4) var<storage, read_write> c: array<f32>;    // (batch, M, c_rs): columns c_off..c_off + N

@compute @workgroup_size(16, 4, 1)
fn matmul_blocked(@builtin(global_invocation_id) gid: vec3<u32>) {
    let row0 = gid.y * 4u;
    let col0 = gid.x * 4u;
    if row0 >= p.m || col0 >= p.n {
        return;
    }
    let batch = gid.z;
    // Rows / columns past the edge are clamped for loading and dropped when storing.
    var a_row: array<u32, 4>;
    var b_col: array<u32, 4>;
    for (var i = 0u; i < 4u; i++) {
        a_row[i] = batch * p.a_bs + min(row0 + i, p.m - 1u) * p.a_rs;
        b_col[i] = batch * p.b_bs + min(col0 + i, p.n - 1u) * p.b_cs;
    }
    var acc: array<vec4<f32>, 4>;
    let k4 = p.k & ~3u;
    for (var k = 0u; k < k4; k += 4u) {
        let ka = k * p.a_cs;
        let kb = k * p.b_rs;
        var bk: array<vec4<f32>, 4>;
        for (var j = 0u; j < 4u; j++) {
            let o = kb + j * p.b_rs;
            bk[j] = vec4(b[b_col[0] + o], b[b_col[1] + o], b[b_col[2] + o], b[b_col[3] + o]);
        }
        for (var i = 0u; i < 4u; i++) {
            let r = a_row[i] + ka;
            let ai = vec4(a[r], a[r + p.a_cs], a[r + 2u * p.a_cs], a[r + 3u * p.a_cs]);
            acc[i] += ai.x * bk[0] + ai.y * bk[1] + ai.z * bk[2] + ai.w * bk[3];
        }
    }
    for (var k = k4; k < p.k; k++) {
        let o = k * p.b_rs;
        let bk = vec4(b[b_col[0] + o], b[b_col[1] + o], b[b_col[2] + o], b[b_col[3] + o]);
        for (var i = 0u; i < 4u; i++) {
            acc[i] += a[a_row[i] + k * p.a_cs] * bk;
        }
    }
    store(batch, row0, col0, acc);
}
