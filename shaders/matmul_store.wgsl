// The epilogue shared by the CPU-adapter matmul kernels (prepended to matmul_blocked.wgsl and
// matmul_blocked_vec4.wgsl, whose Params and bindings `bias` and `c` it uses): adds the bias
// and stores (or, with `accumulate`, adds) 4 columns of row `row` of C from col0, dropping
// what lies past the edges; store() does a 4×4 block.
fn store_row(batch: u32, row: u32, col0: u32, v: vec4<f32>) {
    if row >= p.m {
        return;
    }
    let out = batch * p.c_bs + row * p.c_rs + p.c_off;
    for (var j = 0u; j < 4u; j++) {
        let col = col0 + j;
        if col < p.n {
            var value = v[j];
            if p.has_bias != 0u {
                value += bias[p.c_off + col];
            }
            let at = out + col;
            c[at] = select(value, value + c[at], p.accumulate != 0u);
        }
    }
}

// A 4×4 block from row0 (matmul_blocked.wgsl's).
fn store(batch: u32, row0: u32, col0: u32, acc: array<vec4<f32>, 4>) {
    for (var i = 0u; i < 4u; i++) {
        store_row(batch, row0 + i, col0, acc[i]);
    }
}
