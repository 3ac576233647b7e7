// Knowledge distillation's losses (Hinton et al. 2015; DistilBERT), row by row.
// `soft_rows`: one workgroup per row of student logits s and teacher logits t computes
// KL(softmax(t/T) ‖ softmax(s/T)) = Σ p·(log p − log q), with both logsumexps max-shifted,
// and saves the two logsumexps (of s/T at 2·row, of t/T at 2·row + 1) for the backward.
// `soft_backward`: d s = scale·(q − p), scale = d_loss·T / rows (the T² of the loss over the
// 1/T of s/T). `cosine`: one workgroup per row of student and teacher hidden states computes
// 1 − cos(s, t), as PyTorch's cosine_embedding_loss with target 1 (1e-12 added to each
// squared norm), and its gradient d s = −scale·(t/‖s‖‖t‖ − cos·s/‖s‖²). `mean`: one workgroup
// gives scale·Σ losses / rows.

// workgroup_max / workgroup_sum come from reduce.wgsl, prepended to this file.

struct Params {
    rows: u32,
    cols: u32,
    inv_temperature: f32,  // soft_rows and soft_backward
    scale: f32,            // soft_backward, cosine (gradient) and mean (loss)
}

const WG: u32 = 256u;
const NORM_EPS: f32 = 1e-12;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> student: array<f32>;          // (rows, cols)
@group(0) @binding(2) var<storage, read> teacher: array<f32>;          // (rows, cols)
@group(0) @binding(3) var<storage, read_write> losses: array<f32>;     // (rows)
@group(0) @binding(4) var<storage, read_write> logsumexp: array<f32>;  // (rows, 2)
@group(0) @binding(5) var<storage, read_write> loss: array<f32>;       // (1): mean's output
@group(0) @binding(4) var<storage, read_write> grad: array<f32>;       // (rows, cols): cosine's and soft_backward's output
@group(0) @binding(3) var<storage, read> saved: array<f32>;            // (rows, 2): soft_backward's view of the logsumexps

@compute @workgroup_size(256)
fn soft_rows(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_id) lid: vec3<u32>) {
    let row = wid.x + wid.y * nwg.x;
    if row >= p.rows {
        return;  // uniform across the workgroup: the barriers below stay uniform
    }
    let t = lid.x;
    let base = row * p.cols;
    var ms = -3.0e38;
    var mt = -3.0e38;
    for (var c = t; c < p.cols; c += WG) {
        ms = max_nan(ms, student[base + c]);
        mt = max_nan(mt, teacher[base + c]);
    }
    ms = workgroup_max(t, ms);
    mt = workgroup_max(t, mt);
    var ss = 0.0;
    var st = 0.0;
    for (var c = t; c < p.cols; c += WG) {
        ss += exp((student[base + c] - ms) * p.inv_temperature);
        st += exp((teacher[base + c] - mt) * p.inv_temperature);
    }
    let log_ss = log(workgroup_sum(t, ss));
    let log_st = log(workgroup_sum(t, st));
    var kl = 0.0;
    for (var c = t; c < p.cols; c += WG) {
        let log_q = (student[base + c] - ms) * p.inv_temperature - log_ss;
        let log_p = (teacher[base + c] - mt) * p.inv_temperature - log_st;
        kl += exp(log_p) * (log_p - log_q);
    }
    kl = workgroup_sum(t, kl);
    if t == 0u {
        losses[row] = kl;
        logsumexp[2u * row] = ms * p.inv_temperature + log_ss;
        logsumexp[2u * row + 1u] = mt * p.inv_temperature + log_st;
    }
}

@compute @workgroup_size(256)
fn soft_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = (wid.x + wid.y * nwg.x) * WG + lid.x;
    if i >= p.rows * p.cols {
        return;
    }
    let row = i / p.cols;
    let q = exp(student[i] * p.inv_temperature - saved[2u * row]);
    let target_p = exp(teacher[i] * p.inv_temperature - saved[2u * row + 1u]);
    grad[i] = p.scale * (q - target_p);
}

@compute @workgroup_size(256)
fn cosine(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_id) lid: vec3<u32>) {
    let row = wid.x + wid.y * nwg.x;
    if row >= p.rows {
        return;
    }
    let t = lid.x;
    let base = row * p.cols;
    var dot = 0.0;
    var ss = 0.0;
    var tt = 0.0;
    for (var c = t; c < p.cols; c += WG) {
        let s = student[base + c];
        let u = teacher[base + c];
        dot += s * u;
        ss += s * s;
        tt += u * u;
    }
    dot = workgroup_sum(t, dot);
    let m1 = workgroup_sum(t, ss) + NORM_EPS;
    let m2 = workgroup_sum(t, tt) + NORM_EPS;
    let denom = sqrt(m1 * m2);
    let cos_st = dot / denom;
    for (var c = t; c < p.cols; c += WG) {
        grad[base + c] = -p.scale * (teacher[base + c] / denom - cos_st * student[base + c] / m1);
    }
    if t == 0u {
        losses[row] = 1.0 - cos_st;
    }
}

@compute @workgroup_size(256)
fn mean(@builtin(local_invocation_id) lid: vec3<u32>) {
    let t = lid.x;
    var s = 0.0;
    for (var r = t; r < p.rows; r += WG) {
        s += losses[r];
    }
    let total = workgroup_sum(t, s);
    if t == 0u {
        loss[0] = p.scale * total / f32(p.rows);
    }
}
