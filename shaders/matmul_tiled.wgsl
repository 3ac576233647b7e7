// Batched C = op(A)·op(B) (+ bias) for real GPUs: a 64×64 tile of C per workgroup of 16×16
// invocations, each owning a 4×4 block; A and B stream through workgroup memory in slices of
// TILE_K. Operand strides as in matmul_blocked.wgsl (they cover the transposed forms). With
// `accumulate`, C += op(A)·op(B) (gradients summed over micro-batches and tied weights).

struct Params {
    m: u32, n: u32, k: u32, has_bias: u32,
    a_rs: u32, a_cs: u32, a_bs: u32, c_bs: u32,
    b_rs: u32, b_cs: u32, b_bs: u32, c_rs: u32,
    c_off: u32, accumulate: u32, _pad1: u32, _pad2: u32,
}

const TILE: u32 = 64u;
const TILE_K: u32 = 16u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<f32>;          // (batch | 1, M, K) or (…, K, M)
@group(0) @binding(2) var<storage, read> b: array<f32>;          // (batch | 1, K, N) or (…, N, K)
@group(0) @binding(3) var<storage, read> bias: array<f32>;       // (c_off + N), if has_bias
@group(0) @binding(4) var<storage, read_write> c: array<f32>;    // (batch, M, c_rs): columns c_off..c_off + N

var<workgroup> a_tile: array<array<f32, TILE>, TILE_K>;   // [k][row]
var<workgroup> b_tile: array<array<f32, TILE>, TILE_K>;   // [k][col]

@compute @workgroup_size(16, 16, 1)
fn matmul_tiled(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let batch = wid.z;
    let tile_row = wid.y * TILE;
    let tile_col = wid.x * TILE;
    let t = lid.y * 16u + lid.x;
    var acc: array<vec4<f32>, 4>;
    for (var k0 = 0u; k0 < p.k; k0 += TILE_K) {
        // 256 invocations load 64×16 elements of each operand: 4 each, zero past the edges.
        for (var l = 0u; l < 4u; l++) {
            let e = t + l * 256u;
            let kk = e / TILE;
            let rc = e % TILE;
            let k = k0 + kk;
            let row = tile_row + rc;
            let col = tile_col + rc;
            var av = 0.0;
            if row < p.m && k < p.k {
                av = a[batch * p.a_bs + row * p.a_rs + k * p.a_cs];
            }
            var bv = 0.0;
            if col < p.n && k < p.k {
                bv = b[batch * p.b_bs + k * p.b_rs + col * p.b_cs];
            }
            a_tile[kk][rc] = av;
            b_tile[kk][rc] = bv;
        }
        workgroupBarrier();
        for (var kk = 0u; kk < TILE_K; kk++) {
            let bv = vec4(b_tile[kk][lid.x * 4u], b_tile[kk][lid.x * 4u + 1u],
                          b_tile[kk][lid.x * 4u + 2u], b_tile[kk][lid.x * 4u + 3u]);
            for (var i = 0u; i < 4u; i++) {
                acc[i] += a_tile[kk][lid.y * 4u + i] * bv;
            }
        }
        workgroupBarrier();
    }
    for (var i = 0u; i < 4u; i++) {
        let row = tile_row + lid.y * 4u + i;
        if row < p.m {
            for (var j = 0u; j < 4u; j++) {
                let col = tile_col + lid.x * 4u + j;
                if col < p.n {
                    var v = acc[i][j];
                    if p.has_bias != 0u {
                        v += bias[p.c_off + col];
                    }
                    let at = batch * p.c_bs + row * p.c_rs + p.c_off + col;
                    if p.accumulate != 0u {
                        v += c[at];
                    }
                    c[at] = v;
                }
            }
        }
    }
}
