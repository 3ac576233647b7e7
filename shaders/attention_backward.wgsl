// Backward of attention.wgsl from its saved probabilities P [B, H, Tq, Tk] (0 where a key was
// masked), one invocation per row, no atomics. With dO the output's gradient and M_ij the
// dropout factor of probability ij (1 without dropout; the output is Σ_j P_ij·M_ij·V_j):
//   dP_ij = M_ij·(dO_i · V_j),   dS_ij = P_ij·(dP_ij − Σ_j' P_ij'·dP_ij')   (softmax backward)
//   dQ_i = scale·Σ_j dS_ij K_j     `attention_backward_query`: per query, also writes dS
//   dK_j = scale·Σ_i dS_ij Q_i     `attention_backward_key`:   per key
//   dV_j = Σ_i P_ij·M_ij dO_i      `attention_backward_value`: per key
// Gradients are written at the operand's own columns (off + h·D) of a tensor laid out like
// it, so a fused q|k|v input gets one fused gradient from the three dispatches.

// Params comes from attention_params.wgsl, prepended to this file.

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;             // (B, Tq, q_stride)
@group(0) @binding(2) var<storage, read> k: array<f32>;             // (B, ≥Tk, kv_stride)
@group(0) @binding(3) var<storage, read> v: array<f32>;             // (B, ≥Tk, kv_stride)
@group(0) @binding(4) var<storage, read> probs: array<f32>;         // (B, H, Tq, Tk)
@group(0) @binding(5) var<storage, read> d_out: array<f32>;         // (B, Tq, out_stride = H·D)
@group(0) @binding(6) var<storage, read_write> ds: array<f32>;      // (B, H, Tq, Tk): dS
@group(0) @binding(7) var<storage, read_write> grad: array<f32>;    // dQ like q | dK, dV like k, v

fn prob_row(b: u32, h: u32, i: u32) -> u32 {
    return ((b * p.heads + h) * p.tq + i) * p.tk;
}

fn k_row(b: u32, j: u32) -> u32 {
    return b * p.kv_batch_stride + j * p.kv_stride;
}

fn q_row(b: u32, i: u32) -> u32 {
    return b * p.q_batch_stride + i * p.q_stride;
}

@compute @workgroup_size(64)
fn attention_backward_query(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    let h = gid.y;
    let b = gid.z;
    if i >= p.tq {
        return;
    }
    let row = prob_row(b, h, i);
    let do_base = (b * p.tq + i) * p.out_stride + h * p.head_dim;
    // dP into ds, and Σ_j P_ij·dP_ij.
    var weighted = 0.0;
    for (var j = 0u; j < p.tk; j++) {
        let pj = probs[row + j];
        var dp = 0.0;
        if pj != 0.0 {
            let v_base = k_row(b, j) + p.v_off + h * p.head_dim;
            for (var d = 0u; d < p.head_dim; d++) {
                dp += d_out[do_base + d] * v[v_base + d];
            }
            dp *= prob_dropout(row + j);
        }
        ds[row + j] = dp;
        weighted += pj * dp;
    }
    for (var j = 0u; j < p.tk; j++) {
        ds[row + j] = probs[row + j] * (ds[row + j] - weighted);
    }
    let q_base = q_row(b, i) + p.q_off + h * p.head_dim;
    for (var d = 0u; d < p.head_dim; d++) {
        var acc = 0.0;
        for (var j = 0u; j < p.tk; j++) {
            acc += ds[row + j] * k[k_row(b, j) + p.k_off + h * p.head_dim + d];
        }
        grad[q_base + d] = acc * p.scale;
    }
}

@compute @workgroup_size(64)
fn attention_backward_key(@builtin(global_invocation_id) gid: vec3<u32>) {
    let j = gid.x;
    let h = gid.y;
    let b = gid.z;
    if j >= p.tk {
        return;
    }
    let k_base = k_row(b, j) + p.k_off + h * p.head_dim;
    for (var d = 0u; d < p.head_dim; d++) {
        var acc = 0.0;
        for (var i = 0u; i < p.tq; i++) {
            acc += ds[prob_row(b, h, i) + j] * q[q_row(b, i) + p.q_off + h * p.head_dim + d];
        }
        grad[k_base + d] = acc * p.scale;
    }
}

@compute @workgroup_size(64)
fn attention_backward_value(@builtin(global_invocation_id) gid: vec3<u32>) {
    let j = gid.x;
    let h = gid.y;
    let b = gid.z;
    if j >= p.tk {
        return;
    }
    let v_base = k_row(b, j) + p.v_off + h * p.head_dim;
    for (var d = 0u; d < p.head_dim; d++) {
        var acc = 0.0;
        for (var i = 0u; i < p.tq; i++) {
            let index = prob_row(b, h, i) + j;
            acc += probs[index] * prob_dropout(index) * d_out[(b * p.tq + i) * p.out_stride + h * p.head_dim + d];
        }
        grad[v_base + d] = acc;
    }
}
