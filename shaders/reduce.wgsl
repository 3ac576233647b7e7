// Workgroup reductions shared by the row kernels (softmax, layer norm, cross-entropy,
// attention). Prepended to those shaders' source; the including shader declares
// `const WG: u32` (its workgroup size, a power of two). Every invocation of the workgroup
// must call them (they contain barriers) and gets the result back.

var<workgroup> partial: array<f32, WG>;

// Max of `v` over the workgroup; `t` is the local invocation index.
fn workgroup_max(t: u32, v: f32) -> f32 {
    partial[t] = v;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
        if t < stride {
            partial[t] = max(partial[t], partial[t + stride]);
        }
        workgroupBarrier();
    }
    return workgroupUniformLoad(&partial[0]);
}

// Sum of `v` over the workgroup; `t` is the local invocation index.
fn workgroup_sum(t: u32, v: f32) -> f32 {
    partial[t] = v;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
        if t < stride {
            partial[t] += partial[t + stride];
        }
        workgroupBarrier();
    }
    return workgroupUniformLoad(&partial[0]);
}
