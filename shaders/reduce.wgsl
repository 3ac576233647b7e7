// Workgroup reductions shared by the row kernels (softmax, layer norm, cross-entropy,
// attention). Prepended to those shaders' source; the including shader declares
// `const WG: u32` (its workgroup size, a power of two). Every invocation of the workgroup
// must call them (they contain barriers) and gets the result back.

var<workgroup> partial: array<f32, WG>;

// Whether `x` is NaN, from its bits: a shader compiler may assume that no float compares
// unordered, so `x != x` is not a reliable test.
fn is_nan(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}

// The larger of a and b, or NaN when either is: max() may return the other operand for a NaN
// (LLVM's maxnum does), which would turn a row of NaNs into a finite answer.
fn max_nan(a: f32, b: f32) -> f32 {
    return select(max(a, b), a + b, is_nan(a) || is_nan(b));
}

// Max of `v` over the workgroup; `t` is the local invocation index.
fn workgroup_max(t: u32, v: f32) -> f32 {
    partial[t] = v;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
        if t < stride {
            partial[t] = max_nan(partial[t], partial[t + stride]);
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
