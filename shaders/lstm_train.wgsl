// The LSTM with a projected state for training: a forward that records what the backward
// needs, and backpropagation through time. One invocation per (element, batch item): x over
// cells or projection elements in workgroups of 64, y over items. The weights keep
// AllenNLP's row-major layouts (W_state [4·cell, proj], bias [4·cell], W_proj [proj, cell]),
// since the optimizer updates them every step; the inference kernels (lstm.wgsl) re-block
// them instead.
//
// Forward, per step s (both recorded for every step):
//   trace_cell       (j, b): gates from gates_x[b, t] + bias + h(t_prev)·W_stateᵀ, where
//                    h(t_prev) is the output row of the item's previous step (0 at its first);
//                    records the activated gates (i, f, g, o), (c before the clip, c) and m.
//   trace_projection (k, b): h_pre = m·W_projᵀ, recorded, and outputs[b, t] = clip(h_pre).
// Backward, per step from the last to the first:
//   backward_h       (k, b): dh_pre = (d_outputs[b, t] + dh carried from step s + 1), zero
//                    where the projection clip was active (PyTorch's clamp passes gradient
//                    at |x| ≤ limit).
//   backward_cell    (j, b): dm = dh_pre·W_proj, through m = o·tanh(c), the cell clip and
//                    c = i·g + f·c_prev to the gate pre-activations d_gates[b, t]; carries
//                    dc_prev = dc_pre·f to step s − 1.
//   backward_state   (k, b): dh carried to step s − 1 = d_gates[b, t]·W_state.
// The weight gradients are matmuls over all steps, done by the host afterwards.
// Without a projection (p.project = 0, proj = cell; W_proj is not read) h_pre = m and
// dm = dh_pre.
// Item b works at time t = time_index(b) (lstm_common.wgsl, prepended); inactive items do
// nothing, so their rows of every record keep the zeros they were created with.

const WG: u32 = 64u;

// Bindings of trace_cell.
@group(0) @binding(2) var<storage, read> gates_x: array<f32>;            // (B, T, 4·cell)
@group(0) @binding(3) var<storage, read> w_state: array<f32>;            // (4·cell, proj)
@group(0) @binding(4) var<storage, read> state_bias: array<f32>;         // (4·cell)
@group(0) @binding(5) var<storage, read> outputs_in: array<f32>;         // (B, T, proj)
@group(0) @binding(6) var<storage, read_write> gates_out: array<vec4<f32>>; // (B, T, cell) × (i, f, g, o)
@group(0) @binding(7) var<storage, read_write> cells_out: array<vec2<f32>>; // (B, T, cell) × (c_pre, c)
@group(0) @binding(8) var<storage, read_write> m_out: array<f32>;        // (B, T, cell)

// Bindings of trace_projection.
@group(0) @binding(2) var<storage, read> w_proj: array<f32>;             // (proj, cell)
@group(0) @binding(3) var<storage, read> m_in: array<f32>;               // (B, T, cell)
@group(0) @binding(4) var<storage, read_write> h_pre_out: array<f32>;    // (B, T, proj)
@group(0) @binding(5) var<storage, read_write> outputs: array<f32>;      // (B, T, proj)

// Bindings of backward_h.
@group(0) @binding(2) var<storage, read> d_outputs: array<f32>;          // (B, T, proj)
@group(0) @binding(3) var<storage, read> h_pre_in: array<f32>;           // (B, T, proj)
@group(0) @binding(4) var<storage, read> dh_carry_in: array<f32>;        // (B, proj)
@group(0) @binding(5) var<storage, read_write> dh_pre_out: array<f32>;   // (B, T, proj)

// Bindings of backward_cell.
@group(0) @binding(2) var<storage, read> dh_pre_in: array<f32>;          // (B, T, proj)
@group(0) @binding(3) var<storage, read> w_proj_b: array<f32>;           // (proj, cell)
@group(0) @binding(4) var<storage, read> gates_in: array<vec4<f32>>;     // (B, T, cell)
@group(0) @binding(5) var<storage, read> cells_in: array<vec2<f32>>;     // (B, T, cell)
@group(0) @binding(6) var<storage, read_write> dc_carry: array<f32>;     // (B, cell)
@group(0) @binding(7) var<storage, read_write> d_gates_out: array<f32>;  // (B, T, 4·cell)

// Bindings of backward_state.
@group(0) @binding(2) var<storage, read> d_gates_in: array<f32>;         // (B, T, 4·cell)
@group(0) @binding(3) var<storage, read> w_state_b: array<f32>;          // (4·cell, proj)
@group(0) @binding(4) var<storage, read_write> dh_carry: array<f32>;     // (B, proj)

// The row (b, t) of item b's previous step: t − 1 going forward, t + 1 in reverse. Only
// meaningful once p.step ≥ 1.
fn previous_row(b: u32, t: u32) -> u32 {
    return b * p.seq + select(t - 1u, t + 1u, p.reverse != 0u);
}

@compute @workgroup_size(64)
fn trace_cell(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let j = wid.x * WG + lid.x;
    let b = wid.y;
    if j >= p.cell {
        return;
    }
    let t = time_index(b);
    if t >= p.seq {
        return;
    }
    let c1 = p.cell;
    let gx = (b * p.seq + t) * 4u * c1 + j;
    var pre = vec4(gates_x[gx], gates_x[gx + c1], gates_x[gx + 2u * c1], gates_x[gx + 3u * c1]);
    pre += vec4(state_bias[j], state_bias[j + c1], state_bias[j + 2u * c1], state_bias[j + 3u * c1]);
    var c_prev = 0.0;
    if p.step > 0u {
        let prev = previous_row(b, t);
        let h = prev * p.proj;
        for (var k = 0u; k < p.proj; k++) {
            let hk = outputs_in[h + k];
            pre += hk * vec4(w_state[j * p.proj + k], w_state[(j + c1) * p.proj + k], w_state[(j + 2u * c1) * p.proj + k], w_state[(j + 3u * c1) * p.proj + k]);
        }
        c_prev = cells_out[prev * c1 + j].y;
    }
    let gates = vec4(sigmoid(pre.x), sigmoid(pre.y), safe_tanh(pre.z), sigmoid(pre.w));
    let c_pre = gates.x * gates.z + gates.y * c_prev;
    var c = c_pre;
    if p.clip_cell != 0u {
        c = clamp(c, -p.cell_clip, p.cell_clip);
    }
    let row = (b * p.seq + t) * c1 + j;
    gates_out[row] = gates;
    cells_out[row] = vec2(c_pre, c);
    m_out[row] = gates.w * safe_tanh(c);
}

@compute @workgroup_size(64)
fn trace_projection(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let k = wid.x * WG + lid.x;
    let b = wid.y;
    if k >= p.proj {
        return;
    }
    let t = time_index(b);
    if t >= p.seq {
        return;
    }
    let m = (b * p.seq + t) * p.cell;
    var h = 0.0;
    if p.project == 0u {
        h = m_in[m + k];
    } else {
        for (var j = 0u; j < p.cell; j++) {
            h += m_in[m + j] * w_proj[k * p.cell + j];
        }
    }
    let out = (b * p.seq + t) * p.proj + k;
    h_pre_out[out] = h;
    if p.clip_proj != 0u {
        h = clamp(h, -p.proj_clip, p.proj_clip);
    }
    outputs[out] = h;
}

@compute @workgroup_size(64)
fn backward_h(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let k = wid.x * WG + lid.x;
    let b = wid.y;
    if k >= p.proj {
        return;
    }
    let t = time_index(b);
    if t >= p.seq {
        return;
    }
    let at = (b * p.seq + t) * p.proj + k;
    var dh = d_outputs[at] + dh_carry_in[b * p.proj + k];
    if p.clip_proj != 0u && abs(h_pre_in[at]) > p.proj_clip {
        dh = 0.0;
    }
    dh_pre_out[at] = dh;
}

@compute @workgroup_size(64)
fn backward_cell(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let j = wid.x * WG + lid.x;
    let b = wid.y;
    if j >= p.cell {
        return;
    }
    let t = time_index(b);
    if t >= p.seq {
        return;
    }
    let c1 = p.cell;
    let h = (b * p.seq + t) * p.proj;
    var dm = 0.0;
    if p.project == 0u {
        dm = dh_pre_in[h + j];
    } else {
        for (var k = 0u; k < p.proj; k++) {
            dm += dh_pre_in[h + k] * w_proj_b[k * c1 + j];
        }
    }
    let row = (b * p.seq + t) * c1 + j;
    let g = gates_in[row];
    let cells = cells_in[row];
    var c_prev = 0.0;
    if p.step > 0u {
        c_prev = cells_in[previous_row(b, t) * c1 + j].y;
    }
    let tanh_c = safe_tanh(cells.y);
    let d_output_gate = dm * tanh_c;
    let carry = b * c1 + j;
    var dc = dc_carry[carry] + dm * g.w * (1.0 - tanh_c * tanh_c);
    if p.clip_cell != 0u && abs(cells.x) > p.cell_clip {
        dc = 0.0;
    }
    dc_carry[carry] = dc * g.y;
    let d = (b * p.seq + t) * 4u * c1 + j;
    d_gates_out[d] = dc * g.z * g.x * (1.0 - g.x);
    d_gates_out[d + c1] = dc * c_prev * g.y * (1.0 - g.y);
    d_gates_out[d + 2u * c1] = dc * g.x * (1.0 - g.z * g.z);
    d_gates_out[d + 3u * c1] = d_output_gate * g.w * (1.0 - g.w);
}

@compute @workgroup_size(64)
fn backward_state(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let k = wid.x * WG + lid.x;
    let b = wid.y;
    if k >= p.proj {
        return;
    }
    let t = time_index(b);
    if t >= p.seq {
        return;
    }
    let d = (b * p.seq + t) * 4u * p.cell;
    var dh = 0.0;
    for (var row = 0u; row < 4u * p.cell; row++) {
        dh += d_gates_in[d + row] * w_state_b[row * p.proj + k];
    }
    dh_carry[b * p.proj + k] = dh;
}
