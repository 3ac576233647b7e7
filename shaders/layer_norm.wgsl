// Layer normalization over the last dimension, one workgroup per row:
// y = (x − mean)·rstd·gamma + beta with rstd = 1/√(var + eps). Also writes mean and rstd per
// row for the backward pass.
//
// Accuracy: the row is first shifted by its first element K (x − K is exact for values of
// similar magnitude), the mean of the shifted values d is reduced, and the variance is reduced
// from the centered values (x − K) − d in a second pass. Rows with a large mean (1000 + small
// noise) thus keep the precision of the noise instead of losing it to cancellation.

// workgroup_max / workgroup_sum come from reduce.wgsl, prepended to this file.

struct Params {
    rows: u32,
    cols: u32,
    eps: f32,
    _pad: u32,
}

const WG: u32 = 256u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;           // (rows, cols)
@group(0) @binding(2) var<storage, read> gamma: array<f32>;       // (cols)
@group(0) @binding(3) var<storage, read> beta: array<f32>;        // (cols)
@group(0) @binding(4) var<storage, read_write> y: array<f32>;     // (rows, cols)
@group(0) @binding(5) var<storage, read_write> mean: array<f32>;  // (rows)
@group(0) @binding(6) var<storage, read_write> rstd: array<f32>;  // (rows)

@compute @workgroup_size(256)
fn layer_norm(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_id) lid: vec3<u32>) {
    let row = wid.x + wid.y * nwg.x;
    if row >= p.rows {
        return;
    }
    let t = lid.x;
    let base = row * p.cols;
    let n = f32(p.cols);
    let shift = x[base];

    var s = 0.0;
    for (var c = t; c < p.cols; c += WG) {
        s += x[base + c] - shift;
    }
    let d = workgroup_sum(t, s) / n;  // mean − shift

    var q = 0.0;
    for (var c = t; c < p.cols; c += WG) {
        let centered = (x[base + c] - shift) - d;
        q += centered * centered;
    }
    let r = 1.0 / sqrt(workgroup_sum(t, q) / n + p.eps);

    for (var c = t; c < p.cols; c += WG) {
        y[base + c] = ((x[base + c] - shift) - d) * r * gamma[c] + beta[c];
    }
    if t == 0u {
        mean[row] = shift + d;
        rstd[row] = r;
    }
}
