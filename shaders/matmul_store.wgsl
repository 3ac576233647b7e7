// The epilogue shared by the CPU-adapter matmul kernels (prepended to matmul_blocked.wgsl and
// matmul_blocked_vec4.wgsl, whose Params and bindings `bias` and `c` it uses): adds the bias
// and stores (or, with `accumulate`, adds) a 4×4 block of C at (row0, col0), dropping rows
// and columns past the edges.
fn store(batch: u32, row0: u32, col0: u32, acc: array<vec4<f32>, 4>) {
    var bias4 = vec4(0.0);
    if p.has_bias != 0u {
        for (var j = 0u; j < 4u; j++) {
            bias4[j] = bias[p.c_off + min(col0 + j, p.n - 1u)];
        }
    }
    for (var i = 0u; i < 4u; i++) {
        let row = row0 + i;
        if row < p.m {
            let out = batch * p.c_bs + row * p.c_rs + p.c_off;
            let v = acc[i] + bias4;
            for (var j = 0u; j < 4u; j++) {
                if col0 + j < p.n {
                    let at = out + col0 + j;
                    c[at] = select(v[j], v[j] + c[at], p.accumulate != 0u);
                }
            }
        }
    }
}
