// Numerically stable softmax over the last dimension, one workgroup per row, with an
// optional additive mask: y = softmax(x + mask). Row r adds mask row r / group_rows, so a
// [B, Tk] padding mask serves attention scores [B, H, Tq, Tk] (group_rows = H·Tq).
//
// Entries ≤ MASKED (−1e30, which covers −inf and finfo(f32).min masks) count as masked: they
// get probability 0, and a row with every entry masked is all zeros instead of NaN.

// workgroup_max / workgroup_sum come from reduce.wgsl, prepended to this file.

struct Params {
    rows: u32,
    cols: u32,
    has_mask: u32,
    group_rows: u32,  // rows per mask row
}

const WG: u32 = 256u;
const MASKED: f32 = -1.0e30;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;        // (rows, cols)
@group(0) @binding(2) var<storage, read> mask: array<f32>;     // (rows / group_rows, cols), if has_mask
@group(0) @binding(3) var<storage, read_write> y: array<f32>;  // (rows, cols)

fn masked_x(base: u32, mask_base: u32, c: u32) -> f32 {
    var v = x[base + c];
    if p.has_mask != 0u {
        v += mask[mask_base + c];
    }
    return v;
}

@compute @workgroup_size(256)
fn softmax(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_id) lid: vec3<u32>) {
    let row = wid.x + wid.y * nwg.x;
    if row >= p.rows {
        return;
    }
    let t = lid.x;
    let base = row * p.cols;
    let mask_base = (row / p.group_rows) * p.cols;

    var m = MASKED;
    for (var c = t; c < p.cols; c += WG) {
        m = max_nan(m, masked_x(base, mask_base, c));
    }
    m = workgroup_max(t, m);
    if m <= MASKED {
        for (var c = t; c < p.cols; c += WG) {
            y[base + c] = 0.0;
        }
        return;
    }

    var s = 0.0;
    for (var c = t; c < p.cols; c += WG) {
        let v = masked_x(base, mask_base, c);
        s += select(exp(v - m), 0.0, v <= MASKED);
    }
    let inv = 1.0 / workgroup_sum(t, s);
    for (var c = t; c < p.cols; c += WG) {
        let v = masked_x(base, mask_base, c);
        y[base + c] = select(exp(v - m) * inv, 0.0, v <= MASKED);
    }
}
