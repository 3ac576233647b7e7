// Batched C = A·B and C = A·Bᵀ (+ bias) for CPU adapters when the operands' rows are
// 16-byte aligned: each invocation owns a block of C in registers and reads A and B as vec4
// along their contiguous dimension — one 16-byte load where matmul_blocked.wgsl needs four
// scalar gathers. No workgroup memory, no barriers.
//
// The blocks are written out by hand, without arrays or inner loops: SwiftShader keeps a
// private array in memory and runs small loops as loops, which made the 4×8 block 2.3×
// slower there (5.0 against 2.2 GFLOP/s at 128×384·384×1536); lavapipe's LLVM unrolls either
// form. 4 rows × 8 columns, where lavapipe measured 18 GFLOP/s at 1024³ against 14.7 for
// 4×4; 1 row × 8 columns when M is 1 (decoding one token; M counts a shared B's batch
// folded in), where a 4-row block would leave 3 rows idle.
//
// Lengths and strides here count vec4s: k4 = K/4, and b's row length is n/4 (A·B) or k4 (A·Bᵀ).

// store_row() comes from matmul_store.wgsl, prepended to this file.

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

// Where row `row` of A starts; rows past the edge are clamped (computed, then dropped by
// store_row()).
fn a_row(batch: u32, row: u32) -> u32 {
    return batch * p.a_bs + min(row, p.m - 1u) * p.k4;
}

// x·B for 4 columns of A·B: x holds A's values at k = 4kk..4kk+3, `rows_at` is where B's row
// 4kk starts (kk·4·n4, in vec4s) and `col4` the columns' vec4 in a row (batch offset included).
fn times_rows(x: vec4<f32>, rows_at: u32, col4: u32, n4: u32) -> vec4<f32> {
    let at = rows_at + col4;
    return x.x * b[at] + x.y * b[at + n4] + x.z * b[at + 2u * n4] + x.w * b[at + 3u * n4];
}

// Stores a 4×8 block from (row0, col0): row i's two vec4s are ci0 and ci1.
fn store_block(batch: u32, row0: u32, col0: u32, c00: vec4<f32>, c01: vec4<f32>, c10: vec4<f32>, c11: vec4<f32>, c20: vec4<f32>, c21: vec4<f32>, c30: vec4<f32>, c31: vec4<f32>) {
    store_row(batch, row0, col0, c00);
    store_row(batch, row0, col0 + 4u, c01);
    store_row(batch, row0 + 1u, col0, c10);
    store_row(batch, row0 + 1u, col0 + 4u, c11);
    store_row(batch, row0 + 2u, col0, c20);
    store_row(batch, row0 + 2u, col0 + 4u, c21);
    store_row(batch, row0 + 3u, col0, c30);
    store_row(batch, row0 + 3u, col0 + 4u, c31);
}

// C = A·B: N must be a multiple of 4. Each invocation owns 4 rows × 8 columns (two vec4s);
// every B value loaded feeds 4 multiply-adds, every A value 8.
@compute @workgroup_size(8, 8, 1)
fn matmul_nn(@builtin(global_invocation_id) gid: vec3<u32>) {
    let row0 = gid.y * 4u;
    let col0 = gid.x * 8u;
    if row0 >= p.m || col0 >= p.n {
        return;
    }
    let batch = gid.z;
    let n4 = p.n / 4u;
    // The second vec4 column is clamped at the edge (computed, then dropped by store_row()).
    let col4_0 = batch * p.b_bs + gid.x * 2u;
    let col4_1 = batch * p.b_bs + min(gid.x * 2u + 1u, n4 - 1u);
    let a0 = a_row(batch, row0);
    let a1 = a_row(batch, row0 + 1u);
    let a2 = a_row(batch, row0 + 2u);
    let a3 = a_row(batch, row0 + 3u);
    var c00 = vec4(0.0); var c01 = vec4(0.0);
    var c10 = vec4(0.0); var c11 = vec4(0.0);
    var c20 = vec4(0.0); var c21 = vec4(0.0);
    var c30 = vec4(0.0); var c31 = vec4(0.0);
    for (var kk = 0u; kk < p.k4; kk++) {
        // B's 8 vec4s are loaded once for the 4 rows (times_rows would load them per row).
        let r = kk * 4u * n4;
        let b00 = b[col4_0 + r];
        let b01 = b[col4_0 + r + n4];
        let b02 = b[col4_0 + r + 2u * n4];
        let b03 = b[col4_0 + r + 3u * n4];
        let b10 = b[col4_1 + r];
        let b11 = b[col4_1 + r + n4];
        let b12 = b[col4_1 + r + 2u * n4];
        let b13 = b[col4_1 + r + 3u * n4];
        let x0 = a[a0 + kk];
        c00 += x0.x * b00 + x0.y * b01 + x0.z * b02 + x0.w * b03;
        c01 += x0.x * b10 + x0.y * b11 + x0.z * b12 + x0.w * b13;
        let x1 = a[a1 + kk];
        c10 += x1.x * b00 + x1.y * b01 + x1.z * b02 + x1.w * b03;
        c11 += x1.x * b10 + x1.y * b11 + x1.z * b12 + x1.w * b13;
        let x2 = a[a2 + kk];
        c20 += x2.x * b00 + x2.y * b01 + x2.z * b02 + x2.w * b03;
        c21 += x2.x * b10 + x2.y * b11 + x2.z * b12 + x2.w * b13;
        let x3 = a[a3 + kk];
        c30 += x3.x * b00 + x3.y * b01 + x3.z * b02 + x3.w * b03;
        c31 += x3.x * b10 + x3.y * b11 + x3.z * b12 + x3.w * b13;
    }
    store_block(batch, row0, col0, c00, c01, c10, c11, c20, c21, c30, c31);
}

// C = A·B a row at a time: each invocation owns 8 columns (two vec4s) of one row. 16 per
// workgroup, so that a row of 384 columns is still 3 workgroups (the unit a CPU adapter
// spreads over its threads).
@compute @workgroup_size(16, 1, 1)
fn matmul_nn_row(@builtin(global_invocation_id) gid: vec3<u32>) {
    let row = gid.y;
    let col0 = gid.x * 8u;
    if row >= p.m || col0 >= p.n {
        return;
    }
    let batch = gid.z;
    let n4 = p.n / 4u;
    let col4_0 = batch * p.b_bs + gid.x * 2u;
    let col4_1 = batch * p.b_bs + min(gid.x * 2u + 1u, n4 - 1u);
    let a0 = a_row(batch, row);
    var c0 = vec4(0.0);
    var c1 = vec4(0.0);
    for (var kk = 0u; kk < p.k4; kk++) {
        let x = a[a0 + kk];
        let r = kk * 4u * n4;
        c0 += times_rows(x, r, col4_0, n4);
        c1 += times_rows(x, r, col4_1, n4);
    }
    store_row(batch, row, col0, c0);
    store_row(batch, row, col0 + 4u, c1);
}

// Where row `row` of B, stored (N, K), starts (column `row` of C), clamped at the edge.
fn b_row(batch: u32, row: u32) -> u32 {
    return batch * p.b_bs + min(row, p.n - 1u) * p.k4;
}

// x·Bᵀ for 4 columns of C: w0..w3 are the vec4s at the same k of 4 rows of B, stored (N, K).
fn dot4(x: vec4<f32>, w0: vec4<f32>, w1: vec4<f32>, w2: vec4<f32>, w3: vec4<f32>) -> vec4<f32> {
    return vec4(dot(x, w0), dot(x, w1), dot(x, w2), dot(x, w3));
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
    let a0 = a_row(batch, row0);
    let a1 = a_row(batch, row0 + 1u);
    let a2 = a_row(batch, row0 + 2u);
    let a3 = a_row(batch, row0 + 3u);
    let r0 = b_row(batch, col0);
    let r1 = b_row(batch, col0 + 1u);
    let r2 = b_row(batch, col0 + 2u);
    let r3 = b_row(batch, col0 + 3u);
    let r4 = b_row(batch, col0 + 4u);
    let r5 = b_row(batch, col0 + 5u);
    let r6 = b_row(batch, col0 + 6u);
    let r7 = b_row(batch, col0 + 7u);
    var c00 = vec4(0.0); var c01 = vec4(0.0);
    var c10 = vec4(0.0); var c11 = vec4(0.0);
    var c20 = vec4(0.0); var c21 = vec4(0.0);
    var c30 = vec4(0.0); var c31 = vec4(0.0);
    for (var kk = 0u; kk < p.k4; kk++) {
        let w0 = b[r0 + kk];
        let w1 = b[r1 + kk];
        let w2 = b[r2 + kk];
        let w3 = b[r3 + kk];
        let w4 = b[r4 + kk];
        let w5 = b[r5 + kk];
        let w6 = b[r6 + kk];
        let w7 = b[r7 + kk];
        let x0 = a[a0 + kk];
        c00 += dot4(x0, w0, w1, w2, w3);
        c01 += dot4(x0, w4, w5, w6, w7);
        let x1 = a[a1 + kk];
        c10 += dot4(x1, w0, w1, w2, w3);
        c11 += dot4(x1, w4, w5, w6, w7);
        let x2 = a[a2 + kk];
        c20 += dot4(x2, w0, w1, w2, w3);
        c21 += dot4(x2, w4, w5, w6, w7);
        let x3 = a[a3 + kk];
        c30 += dot4(x3, w0, w1, w2, w3);
        c31 += dot4(x3, w4, w5, w6, w7);
    }
    store_block(batch, row0, col0, c00, c01, c10, c11, c20, c21, c30, c31);
}

// C = A·Bᵀ a row at a time: each invocation owns 8 columns of one row.
@compute @workgroup_size(16, 1, 1)
fn matmul_nt_row(@builtin(global_invocation_id) gid: vec3<u32>) {
    let row = gid.y;
    let col0 = gid.x * 8u;
    if row >= p.m || col0 >= p.n {
        return;
    }
    let batch = gid.z;
    let a0 = a_row(batch, row);
    let r0 = b_row(batch, col0);
    let r1 = b_row(batch, col0 + 1u);
    let r2 = b_row(batch, col0 + 2u);
    let r3 = b_row(batch, col0 + 3u);
    let r4 = b_row(batch, col0 + 4u);
    let r5 = b_row(batch, col0 + 5u);
    let r6 = b_row(batch, col0 + 6u);
    let r7 = b_row(batch, col0 + 7u);
    var c0 = vec4(0.0);
    var c1 = vec4(0.0);
    for (var kk = 0u; kk < p.k4; kk++) {
        let x = a[a0 + kk];
        c0 += dot4(x, b[r0 + kk], b[r1 + kk], b[r2 + kk], b[r3 + kk]);
        c1 += dot4(x, b[r4 + kk], b[r5 + kk], b[r6 + kk], b[r7 + kk]);
    }
    store_row(batch, row, col0, c0);
    store_row(batch, row, col0 + 4u, c1);
}
