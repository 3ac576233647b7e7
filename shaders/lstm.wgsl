// One time step of an LSTM with a projected state (ELMo / AllenNLP LstmCellWithProjection),
// as two dispatches recorded per step:
//   lstm_cell       (one invocation per (b, j), j < cell): gates = gates_x[b, t] + h·W_stateᵀ
//                   + bias in the order input, forget, cell, output; c = i·g + f·c (clipped),
//                   m = o·tanh(c). c is updated in place.
//   lstm_projection (one invocation per (b, k), k < proj): h = clip(m·W_projᵀ), written in
//                   place and to outputs[b, t].
// Item b is active at steps s < lengths[b], at time t = s (forward) or lengths[b] − 1 − s
// (reverse: each sequence starts from its own last token). Inactive items keep their state
// and write nothing, so padded outputs keep the zeros they were created with.

struct Params {
    batch: u32, seq: u32, cell: u32, proj: u32,
    step: u32, reverse: u32, clip_cell: u32, clip_proj: u32,
    cell_clip: f32, proj_clip: f32, _pad0: u32, _pad1: u32,
}

const WG: u32 = 64u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> lengths: array<u32>;          // (B)

// Bindings of lstm_cell.
@group(0) @binding(2) var<storage, read> gates_x: array<f32>;          // (B, T, 4·cell)
@group(0) @binding(3) var<storage, read> w_state: array<f32>;          // (4·cell, proj)
@group(0) @binding(4) var<storage, read> state_bias: array<f32>;       // (4·cell)
@group(0) @binding(5) var<storage, read> h_prev: array<f32>;           // (B, proj)
@group(0) @binding(6) var<storage, read_write> c_state: array<f32>;    // (B, cell)
@group(0) @binding(7) var<storage, read_write> m_out: array<f32>;      // (B, cell)

// Bindings of lstm_projection (the same slots, used by the other entry point only).
@group(0) @binding(2) var<storage, read> w_proj: array<f32>;           // (proj, cell)
@group(0) @binding(3) var<storage, read> m_in: array<f32>;             // (B, cell)
@group(0) @binding(4) var<storage, read_write> h_state: array<f32>;    // (B, proj)
@group(0) @binding(5) var<storage, read_write> outputs: array<f32>;    // (B, T, proj)

// The time index item b works on at this step, or T once it is past its length.
fn time_index(b: u32) -> u32 {
    let len = lengths[b];
    if p.step >= len {
        return p.seq;
    }
    return select(p.step, len - 1u - p.step, p.reverse != 0u);
}

fn sigmoid(x: f32) -> f32 {
    return 1.0 / (1.0 + exp(-x));
}

// tanh clamped to where it is ±1 in f32: some drivers compute tanh through exp and overflow.
fn safe_tanh(x: f32) -> f32 {
    return tanh(clamp(x, -15.0, 15.0));
}

fn linear_index(wid: vec3<u32>, nwg: vec3<u32>, lid: vec3<u32>) -> u32 {
    return (wid.x + wid.y * nwg.x) * WG + lid.x;
}

@compute @workgroup_size(64)
fn lstm_cell(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = linear_index(wid, nwg, lid);
    if i >= p.batch * p.cell {
        return;
    }
    let b = i / p.cell;
    let j = i % p.cell;
    let t = time_index(b);
    if t >= p.seq {
        return;
    }
    // The four gate pre-activations of cell j: rows j + q·cell of W_state, q = 0..3.
    let gx = (b * p.seq + t) * 4u * p.cell + j;
    let c1 = p.cell;
    var acc = vec4(gates_x[gx], gates_x[gx + c1], gates_x[gx + 2u * c1], gates_x[gx + 3u * c1])
            + vec4(state_bias[j], state_bias[j + c1], state_bias[j + 2u * c1], state_bias[j + 3u * c1]);
    let gate_stride = p.cell * p.proj;
    let row = j * p.proj;
    let h_base = b * p.proj;
    for (var k = 0u; k < p.proj; k++) {
        let w = row + k;
        acc += h_prev[h_base + k] * vec4(w_state[w], w_state[w + gate_stride],
                                         w_state[w + 2u * gate_stride], w_state[w + 3u * gate_stride]);
    }
    let input_gate = sigmoid(acc.x);
    let forget_gate = sigmoid(acc.y);
    let memory_init = safe_tanh(acc.z);
    let output_gate = sigmoid(acc.w);
    let s = b * p.cell + j;
    var c = input_gate * memory_init + forget_gate * c_state[s];
    if p.clip_cell != 0u {
        c = clamp(c, -p.cell_clip, p.cell_clip);
    }
    c_state[s] = c;
    m_out[s] = output_gate * safe_tanh(c);
}

@compute @workgroup_size(64)
fn lstm_projection(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                   @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = linear_index(wid, nwg, lid);
    if i >= p.batch * p.proj {
        return;
    }
    let b = i / p.proj;
    let k = i % p.proj;
    let t = time_index(b);
    if t >= p.seq {
        return;
    }
    let m_base = b * p.cell;
    let w_base = k * p.cell;
    var h = 0.0;
    for (var j = 0u; j < p.cell; j++) {
        h += m_in[m_base + j] * w_proj[w_base + j];
    }
    if p.clip_proj != 0u {
        h = clamp(h, -p.proj_clip, p.proj_clip);
    }
    h_state[b * p.proj + k] = h;
    outputs[(b * p.seq + t) * p.proj + k] = h;
}
