// Fused log-softmax + negative log-likelihood. `rows`: one workgroup per row of logits
// computes logsumexp (max-shifted) and loss = logsumexp − logit[target]; ignored rows (target
// IGNORED) get loss 0. `mean`: a single workgroup averages the losses over the rows that are
// not ignored, giving 0 when every row is ignored (PyTorch would give NaN there).
// `backward`: the gradient of `scale`·Σ losses, written over the logits in place (the [N, V]
// logits are the largest activation of a language model): softmax − one-hot, times `scale`
// (d_loss / rows counted in the mean), 0 on ignored rows.

// workgroup_max / workgroup_sum come from reduce.wgsl, prepended to this file.

struct Params {
    rows: u32,
    vocab: u32,
    scale: f32,  // backward only
    _pad: u32,
}

const WG: u32 = 256u;
const IGNORED: u32 = 0xffffffffu;  // target of an ignored row (the host maps ignore_index here)

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> logits: array<f32>;          // (rows, vocab)
@group(0) @binding(2) var<storage, read> targets: array<u32>;         // (rows)
@group(0) @binding(3) var<storage, read_write> losses: array<f32>;    // (rows)
@group(0) @binding(4) var<storage, read_write> logsumexp: array<f32>; // (rows)
@group(0) @binding(5) var<storage, read_write> loss: array<f32>;      // (1)
@group(0) @binding(1) var<storage, read_write> dlogits: array<f32>;   // (rows, vocab): backward's view of the logits

@compute @workgroup_size(256)
fn rows(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
    let row = wid.x + wid.y * nwg.x;
    if row >= p.rows {
        return;
    }
    let t = lid.x;
    let base = row * p.vocab;
    var m = -3.0e38;
    for (var c = t; c < p.vocab; c += WG) {
        m = max_nan(m, logits[base + c]);
    }
    m = workgroup_max(t, m);
    var s = 0.0;
    for (var c = t; c < p.vocab; c += WG) {
        s += exp(logits[base + c] - m);
    }
    let log_s = log(workgroup_sum(t, s));
    if t == 0u {
        let class_id = targets[row];
        logsumexp[row] = m + log_s;
        // (m − logit) first: exact for nearby values, so large logits keep the loss precise.
        losses[row] = select((m - logits[base + class_id]) + log_s, 0.0, class_id == IGNORED);
    }
}

@compute @workgroup_size(256)
fn mean(@builtin(local_invocation_id) lid: vec3<u32>) {
    let t = lid.x;
    var s = 0.0;
    var n = 0.0;  // exact up to 2^24 rows
    for (var r = t; r < p.rows; r += WG) {
        if targets[r] != IGNORED {
            s += losses[r];
            n += 1.0;
        }
    }
    let total = workgroup_sum(t, s);
    let count = workgroup_sum(t, n);
    if t == 0u {
        loss[0] = select(total / count, 0.0, count == 0.0);
    }
}

@compute @workgroup_size(256)
fn backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = (wid.x + wid.y * nwg.x) * WG + lid.x;
    if i >= p.rows * p.vocab {
        return;
    }
    let row = i / p.vocab;
    let class_id = targets[row];
    if class_id == IGNORED {
        dlogits[i] = 0.0;
        return;
    }
    let softmax = exp(dlogits[i] - logsumexp[row]);
    dlogits[i] = p.scale * (softmax - select(0.0, 1.0, i % p.vocab == class_id));
}
