// Backward of layer_norm.wgsl, from the saved per-row mean and rstd. With x̂ = (x − mean)·rstd
// and g = dy·gamma:
//   dx = rstd·(g − mean(g) − x̂·mean(g·x̂))       `layer_norm_backward`: one workgroup per row
//   dgamma += Σ_rows dy·x̂,  dbeta += Σ_rows dy    `layer_norm_param_grads`: one invocation per
//                                                  column walking the rows (owner-computes)

// workgroup_sum comes from reduce.wgsl, prepended to this file.

struct Params {
    rows: u32,
    cols: u32,
    eps: f32,  // layer_norm's; the backward reads the saved 1/σ instead
    _pad: u32,
}

const WG: u32 = 256u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;              // (rows, cols)
@group(0) @binding(2) var<storage, read> gamma: array<f32>;          // (cols)
@group(0) @binding(3) var<storage, read> mean: array<f32>;           // (rows)
@group(0) @binding(4) var<storage, read> rstd: array<f32>;           // (rows)
@group(0) @binding(5) var<storage, read> dy: array<f32>;             // (rows, cols)
@group(0) @binding(6) var<storage, read_write> dx: array<f32>;       // (rows, cols); param grads: dgamma (cols)
@group(0) @binding(7) var<storage, read_write> dbeta: array<f32>;    // (cols), param grads only

@compute @workgroup_size(256)
fn layer_norm_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                       @builtin(local_invocation_id) lid: vec3<u32>) {
    let row = wid.x + wid.y * nwg.x;
    if row >= p.rows {
        return;
    }
    let t = lid.x;
    let base = row * p.cols;
    let mu = mean[row];
    let r = rstd[row];
    var sum_g = 0.0;
    var sum_gx = 0.0;
    for (var c = t; c < p.cols; c += WG) {
        let g = dy[base + c] * gamma[c];
        sum_g += g;
        sum_gx += g * (x[base + c] - mu) * r;
    }
    let n = f32(p.cols);
    let mean_g = workgroup_sum(t, sum_g) / n;
    let mean_gx = workgroup_sum(t, sum_gx) / n;
    for (var c = t; c < p.cols; c += WG) {
        let xhat = (x[base + c] - mu) * r;
        dx[base + c] = r * (dy[base + c] * gamma[c] - mean_g - xhat * mean_gx);
    }
}

// Binding 6 is dgamma here.
@compute @workgroup_size(256)
fn layer_norm_param_grads(@builtin(global_invocation_id) gid: vec3<u32>) {
    let c = gid.x;
    if c >= p.cols {
        return;
    }
    var dgamma = 0.0;
    var dbeta_sum = 0.0;
    for (var row = 0u; row < p.rows; row++) {
        let g = dy[row * p.cols + c];
        dgamma += g * (x[row * p.cols + c] - mean[row]) * rstd[row];
        dbeta_sum += g;
    }
    dx[c] += dgamma;
    dbeta[c] += dbeta_sum;
}
