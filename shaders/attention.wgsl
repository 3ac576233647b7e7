// Fused multi-head scaled dot-product attention, one workgroup per (query, head, batch).
// The 64 invocations score 64 keys at a time, fold them into a running (max, sum, output)
// — the online softmax — and each owns up to 4 of the head's output dims; memory is O(1) in
// the sequence length. The same kernel is the query-length-1 path of cached decoding: one
// query against `tk` cached keys, parallel over the keys.
//
// Operands are rows of width `*_stride` whose head h occupies columns off + h·D .. + D, so a
// fused QKV projection (GPT-2's c_attn) is read in place and a KV cache (rows 0..tk of a
// longer buffer) needs no copy.

// workgroup_max / workgroup_sum come from reduce.wgsl, prepended to this file.

// Params comes from attention_params.wgsl, prepended to this file.

const WG: u32 = 64u;
const NEG_INF: f32 = -3.0e38;  // below any real score; marks masked keys

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;            // (B, Tq, q_stride)
@group(0) @binding(2) var<storage, read> k: array<f32>;            // (B, ≥Tk, kv_stride)
@group(0) @binding(3) var<storage, read> v: array<f32>;            // (B, ≥Tk, kv_stride)
@group(0) @binding(4) var<storage, read> key_mask: array<f32>;     // (B, mask_stride): 1 attend, 0 not
@group(0) @binding(5) var<storage, read_write> out: array<f32>;    // (B, Tq, out_stride = H·D)
@group(0) @binding(6) var<storage, read_write> probs: array<f32>;  // (B, H, Tq, Tk), if write_probs

var<workgroup> q_row: array<f32, 256>;
var<workgroup> weights: array<f32, WG>;
// Score of key j, or NEG_INF where it is masked (causally or by padding) or out of range.
fn score(b: u32, h: u32, j: u32, key_end: u32) -> f32 {
    if j >= key_end {
        return NEG_INF;
    }
    if p.has_mask != 0u && key_mask[b * p.mask_stride + j] == 0.0 {
        return NEG_INF;
    }
    let base = b * p.kv_batch_stride + j * p.kv_stride + p.k_off + h * p.head_dim;
    var s = 0.0;
    for (var d = 0u; d < p.head_dim; d++) {
        s += q_row[d] * k[base + d];
    }
    return s * p.scale;
}

@compute @workgroup_size(64)
fn attention(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = wid.x;
    let h = wid.y;
    let b = wid.z;
    let t = lid.x;
    let q_base = b * p.q_batch_stride + i * p.q_stride + p.q_off + h * p.head_dim;
    for (var d = t; d < p.head_dim; d += WG) {
        q_row[d] = q[q_base + d];
    }
    workgroupBarrier();

    var key_end = p.tk;
    if p.causal != 0u {
        key_end = min(p.tk, p.query_offset + i + 1u);
    }
    var m = NEG_INF;   // running max of the scores
    var l = 0.0;       // running sum of exp(score − m)
    var acc = vec4(0.0);  // output dims t, t+64, t+128, t+192
    for (var j0 = 0u; j0 < key_end; j0 += WG) {
        let s = score(b, h, j0 + t, key_end);
        let m_new = max_nan(m, workgroup_max(t, s));
        // Masked scores and an all-masked prefix contribute exactly zero.
        let w = select(exp(s - m_new), 0.0, s == NEG_INF);
        let correction = select(exp(m - m_new), 0.0, m == NEG_INF);
        // The sum normalises the undropped weights; the output sums the dropped ones.
        weights[t] = w * prob_dropout(((b * p.heads + h) * p.tq + i) * p.tk + j0 + t);
        l = l * correction + workgroup_sum(t, w);
        acc *= correction;
        let n = min(WG, key_end - j0);
        for (var jj = 0u; jj < n; jj++) {
            let wj = weights[jj];
            let v_base = b * p.kv_batch_stride + (j0 + jj) * p.kv_stride + p.v_off + h * p.head_dim;
            for (var c = 0u; c < 4u; c++) {
                let d = t + c * WG;
                if d < p.head_dim {
                    acc[c] += wj * v[v_base + d];
                }
            }
        }
        m = m_new;
        workgroupBarrier();
    }
    let inv_l = select(1.0 / l, 0.0, l == 0.0);
    let out_base = (b * p.tq + i) * p.out_stride + h * p.head_dim;
    for (var c = 0u; c < 4u; c++) {
        let d = t + c * WG;
        if d < p.head_dim {
            out[out_base + d] = acc[c] * inv_l;
        }
    }
    if p.write_probs != 0u {
        let row = ((b * p.heads + h) * p.tq + i) * p.tk;
        for (var j = t; j < p.tk; j += WG) {
            let s = score(b, h, j, key_end);
            probs[row + j] = select(exp(s - m) * inv_l, 0.0, s == NEG_INF);
        }
    }
}

// The CPU-adapter variant: one invocation per query, the row's state in registers, no
// workgroup memory and no barriers. Neighbouring invocations (SIMD lanes on a CPU adapter)
// are neighbouring queries of one head, so they read the same key and value rows. Head sizes
// up to ROWS_MAX_DIM.
const ROWS_MAX_DIM4: u32 = 16u;  // head_dim ≤ 64, as vec4s

fn score_row(b: u32, h: u32, j: u32, key_end: u32, qv: ptr<function, array<vec4<f32>, ROWS_MAX_DIM4>>) -> f32 {
    if j >= key_end || (p.has_mask != 0u && key_mask[b * p.mask_stride + j] == 0.0) {
        return NEG_INF;
    }
    let base = b * p.kv_batch_stride + j * p.kv_stride + p.k_off + h * p.head_dim;
    var s = vec4(0.0);
    for (var d4 = 0u; d4 < p.head_dim / 4u; d4++) {
        let o = base + d4 * 4u;
        s += (*qv)[d4] * vec4(k[o], k[o + 1u], k[o + 2u], k[o + 3u]);
    }
    return (s.x + s.y + s.z + s.w) * p.scale;
}

@compute @workgroup_size(64)
fn attention_rows(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    let h = gid.y;
    let b = gid.z;
    if i >= p.tq {
        return;
    }
    let d4n = p.head_dim / 4u;
    let q_base = b * p.q_batch_stride + i * p.q_stride + p.q_off + h * p.head_dim;
    var qv: array<vec4<f32>, ROWS_MAX_DIM4>;
    for (var d4 = 0u; d4 < d4n; d4++) {
        let o = q_base + d4 * 4u;
        qv[d4] = vec4(q[o], q[o + 1u], q[o + 2u], q[o + 3u]);
    }
    var key_end = p.tk;
    if p.causal != 0u {
        key_end = min(p.tk, p.query_offset + i + 1u);
    }
    var m = NEG_INF;
    var l = 0.0;
    var acc: array<vec4<f32>, ROWS_MAX_DIM4>;
    let prob_row = ((b * p.heads + h) * p.tq + i) * p.tk;
    for (var j = 0u; j < key_end; j++) {
        let s = score_row(b, h, j, key_end, &qv);
        if s == NEG_INF {
            continue;
        }
        let m_new = max_nan(m, s);
        let correction = exp(m - m_new);  // 0 while m is still NEG_INF
        let w = exp(s - m_new);
        l = l * correction + w;
        let v_base = b * p.kv_batch_stride + j * p.kv_stride + p.v_off + h * p.head_dim;
        let kept = w * prob_dropout(prob_row + j);
        for (var d4 = 0u; d4 < d4n; d4++) {
            let o = v_base + d4 * 4u;
            acc[d4] = acc[d4] * correction + kept * vec4(v[o], v[o + 1u], v[o + 2u], v[o + 3u]);
        }
        m = m_new;
    }
    let inv_l = select(1.0 / l, 0.0, l == 0.0);
    let out_base = (b * p.tq + i) * p.out_stride + h * p.head_dim;
    for (var d4 = 0u; d4 < d4n; d4++) {
        let r = acc[d4] * inv_l;
        for (var c = 0u; c < 4u; c++) {
            out[out_base + d4 * 4u + c] = r[c];
        }
    }
    if p.write_probs != 0u {
        for (var j = 0u; j < p.tk; j++) {
            let s = score_row(b, h, j, key_end, &qv);
            probs[prob_row + j] = select(exp(s - m) * inv_l, 0.0, s == NEG_INF);
        }
    }
}
