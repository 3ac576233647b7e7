// BatchNorm1d over x (N, C): one invocation per feature c, walking the N rows (batches are
// small; each feature's statistics are owned by one invocation, no atomics).
//   batch_norm_train     mean and biased variance of the batch; y = (x − mean)·inv_std·γ + β
//                        with inv_std = 1/√(var + eps); stats (3, C) = mean, var, inv_std.
//   batch_norm_running   running_mean, running_var in place: (1 − m)·running + m·batch, the
//                        variance unbiased (var·N/(N − 1)), as PyTorch's.
//   batch_norm_eval      y = (x − running_mean)/√(running_var + eps)·γ + β.
//   batch_norm_backward  with x̂ = (x − mean)·inv_std: dγ += Σ dy·x̂, dβ += Σ dy,
//                        dx = γ·inv_std/N·(N·dy − Σ dy − x̂·Σ dy·x̂).

struct Params {
    rows: u32,
    cols: u32,
    eps: f32,
    momentum: f32,
}

const WG: u32 = 64u;

@group(0) @binding(0) var<uniform> p: Params;
// batch_norm_train
@group(0) @binding(1) var<storage, read> x: array<f32>;                    // (N, C)
@group(0) @binding(2) var<storage, read> gamma: array<f32>;                // (C)
@group(0) @binding(3) var<storage, read> beta: array<f32>;                 // (C)
@group(0) @binding(4) var<storage, read_write> y: array<f32>;              // (N, C)
@group(0) @binding(5) var<storage, read_write> stats: array<f32>;          // (3, C)
// batch_norm_running
@group(0) @binding(1) var<storage, read> batch_stats: array<f32>;          // (3, C)
@group(0) @binding(2) var<storage, read_write> running_mean: array<f32>;   // (C)
@group(0) @binding(3) var<storage, read_write> running_var: array<f32>;    // (C)
// batch_norm_eval
@group(0) @binding(4) var<storage, read> mean_in: array<f32>;              // (C)
@group(0) @binding(5) var<storage, read> var_in: array<f32>;               // (C)
@group(0) @binding(6) var<storage, read_write> y_eval: array<f32>;         // (N, C)
// batch_norm_backward
@group(0) @binding(3) var<storage, read> saved: array<f32>;                // (3, C)
@group(0) @binding(4) var<storage, read> dy: array<f32>;                   // (N, C)
@group(0) @binding(5) var<storage, read_write> dx: array<f32>;             // (N, C)
@group(0) @binding(6) var<storage, read_write> d_gamma: array<f32>;        // (C)
@group(0) @binding(7) var<storage, read_write> d_beta: array<f32>;         // (C)

@compute @workgroup_size(64)
fn batch_norm_train(@builtin(global_invocation_id) gid: vec3<u32>) {
    let c = gid.x;
    if c >= p.cols {
        return;
    }
    let n = f32(p.rows);
    var sum = 0.0;
    for (var r = 0u; r < p.rows; r++) {
        sum += x[r * p.cols + c];
    }
    let mean = sum / n;
    var squares = 0.0;
    for (var r = 0u; r < p.rows; r++) {
        let d = x[r * p.cols + c] - mean;
        squares += d * d;
    }
    let variance = squares / n;
    let inv_std = 1.0 / sqrt(variance + p.eps);
    for (var r = 0u; r < p.rows; r++) {
        let i = r * p.cols + c;
        y[i] = (x[i] - mean) * inv_std * gamma[c] + beta[c];
    }
    stats[c] = mean;
    stats[p.cols + c] = variance;
    stats[2u * p.cols + c] = inv_std;
}

@compute @workgroup_size(64)
fn batch_norm_running(@builtin(global_invocation_id) gid: vec3<u32>) {
    let c = gid.x;
    if c >= p.cols {
        return;
    }
    let n = f32(p.rows);
    let unbiased = batch_stats[p.cols + c] * n / max(n - 1.0, 1.0);
    running_mean[c] = (1.0 - p.momentum) * running_mean[c] + p.momentum * batch_stats[c];
    running_var[c] = (1.0 - p.momentum) * running_var[c] + p.momentum * unbiased;
}

@compute @workgroup_size(64)
fn batch_norm_eval(@builtin(global_invocation_id) gid: vec3<u32>) {
    let c = gid.x;
    if c >= p.cols {
        return;
    }
    let scale = gamma[c] / sqrt(var_in[c] + p.eps);
    for (var r = 0u; r < p.rows; r++) {
        let i = r * p.cols + c;
        y_eval[i] = (x[i] - mean_in[c]) * scale + beta[c];
    }
}

@compute @workgroup_size(64)
fn batch_norm_backward(@builtin(global_invocation_id) gid: vec3<u32>) {
    let c = gid.x;
    if c >= p.cols {
        return;
    }
    let n = f32(p.rows);
    let mean = saved[c];
    let inv_std = saved[2u * p.cols + c];
    var sum_dy = 0.0;
    var sum_dy_xhat = 0.0;
    for (var r = 0u; r < p.rows; r++) {
        let i = r * p.cols + c;
        sum_dy += dy[i];
        sum_dy_xhat += dy[i] * (x[i] - mean) * inv_std;
    }
    d_gamma[c] += sum_dy_xhat;
    d_beta[c] += sum_dy;
    let k = gamma[c] * inv_std / n;
    for (var r = 0u; r < p.rows; r++) {
        let i = r * p.cols + c;
        let xhat = (x[i] - mean) * inv_std;
        dx[i] = k * (n * dy[i] - sum_dy - xhat * sum_dy_xhat);
    }
}
