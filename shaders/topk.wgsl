// Top-k over the last dimension, one workgroup per row, in k rounds. The order is total:
// value descending, then index ascending (ties go to the lower index). Round j picks the
// first element strictly after pick j−1 in that order with a workgroup reduction, so no
// exclusion list is kept: O(k·V) reads, O(1) memory in k.

struct Params {
    rows: u32,
    cols: u32,
    k: u32,
    _pad: u32,
}

const WG: u32 = 256u;
const NONE: u32 = 0xffffffffu;  // index of "no element"; last in the order

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;              // (rows, cols)
@group(0) @binding(2) var<storage, read_write> values: array<f32>;   // (rows, k)
@group(0) @binding(3) var<storage, read_write> indices: array<u32>;  // (rows, k)

var<workgroup> best_v: array<f32, WG>;
var<workgroup> best_i: array<u32, WG>;

// Whether (v, i) comes strictly before (w, j) in the order.
fn before(v: f32, i: u32, w: f32, j: u32) -> bool {
    return i != NONE && (j == NONE || v > w || (v == w && i < j));
}

@compute @workgroup_size(256)
fn topk(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
    let row = wid.x + wid.y * nwg.x;
    if row >= p.rows {
        return;
    }
    let t = lid.x;
    let base = row * p.cols;
    var pv = 0.0;   // the previous pick
    var pi = NONE;
    for (var j = 0u; j < p.k; j++) {
        var bv = 0.0;
        var bi = NONE;
        for (var c = t; c < p.cols; c += WG) {
            let v = x[base + c];
            if (j == 0u || before(pv, pi, v, c)) && before(v, c, bv, bi) {
                bv = v;
                bi = c;
            }
        }
        best_v[t] = bv;
        best_i[t] = bi;
        workgroupBarrier();
        for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
            if t < stride && before(best_v[t + stride], best_i[t + stride], best_v[t], best_i[t]) {
                best_v[t] = best_v[t + stride];
                best_i[t] = best_i[t + stride];
            }
            workgroupBarrier();
        }
        pv = workgroupUniformLoad(&best_v[0]);
        pi = workgroupUniformLoad(&best_i[0]);
        if t == 0u {
            values[row * p.k + j] = pv;
            indices[row * p.k + j] = pi;
        }
    }
}
