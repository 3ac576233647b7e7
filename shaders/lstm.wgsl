// One time step of an LSTM with a projected state (ELMo / AllenNLP LstmCellWithProjection),
// as two dispatches recorded per step:
//   lstm_cell       (one invocation per (j, tile of BATCH_TILE items), j < cell):
//                   gates = gates_x[b, t] + h·W_stateᵀ + bias in the order input, forget, cell,
//                   output; c = i·g + f·c (clipped), m = o·tanh(c). c is updated in place.
//   lstm_projection (one invocation per (k, tile of BATCH_TILE items), k < proj):
//                   h = clip(m·W_projᵀ), written in place and to outputs[b, t]; without
//                   a projection (p.project = 0, proj = cell) h = clip(m).
// Each invocation reads its weight row once for the whole tile of batch items, so a batch
// costs about what one item costs in weight traffic (the recurrence is bandwidth-bound).
// The weights are stored in blocks of 8 outputs (cells, or projection elements), so that the
// 8 neighbouring invocations read 8 neighbouring values at each k and each block of them
// streams through one contiguous region (SIMD lanes of CPU drivers, coalesced loads on GPUs):
// W_state as [cell/8, proj, 8] vec4s of the four gates, W_proj as [proj/8, cell/4, 8] vec4s
// of 4 consecutive cells.
// Inactive items keep their state and write nothing, so padded outputs keep the zeros they
// were created with. The params, lengths, time_index and activations come from
// lstm_common.wgsl, prepended.

const WG: u32 = 64u;
// Batch items per invocation: 1, 2, 4 or 8, chosen by the host for the batch size.
override BATCH_TILE: u32 = 1u;
// Outputs per weight block (the host pads cell and proj up to a multiple).
const BLOCK: u32 = 8u;

// Bindings of lstm_cell.
@group(0) @binding(2) var<storage, read> gates_x: array<f32>;          // (B, T, 4·cell)
@group(0) @binding(3) var<storage, read> w_state: array<vec4<f32>>;    // (cell/8, proj, 8) × gates
@group(0) @binding(4) var<storage, read> state_bias: array<vec4<f32>>; // (cell) × gates
@group(0) @binding(5) var<storage, read> h_prev: array<f32>;           // (B, proj)
@group(0) @binding(6) var<storage, read_write> c_state: array<f32>;    // (B, cell)
@group(0) @binding(7) var<storage, read_write> m_out: array<f32>;      // (B, cell)

// Bindings of lstm_projection (the same slots, used by the other entry point only).
@group(0) @binding(2) var<storage, read> w_proj: array<vec4<f32>>;     // (proj/8, cell/4, 8) × 4 cells
@group(0) @binding(3) var<storage, read> m_in: array<f32>;             // (B, cell)
@group(0) @binding(4) var<storage, read_write> h_state: array<f32>;    // (B, proj)
@group(0) @binding(5) var<storage, read_write> outputs: array<f32>;    // (B, T, proj)

// Item u of the tile starting at b0, clamped into the batch: a tile past the end recomputes
// the last item rather than branching inside the inner loop, and never stores it.
fn tile_item(b0: u32, u: u32) -> u32 {
    return min(b0 + u, p.batch - 1u);
}

// The tile is unrolled by hand into named accumulators with `if BATCH_TILE ≥ n` guards, which
// every compiler folds away once the override is known; a loop over a local array instead
// kept the array in memory on llvmpipe and cost 20% at batch 1.

// Gates, cell update and m of item b at cell j from its recurrent pre-activations.
fn finish_cell(b: u32, j: u32, recurrent: vec4<f32>) {
    if b >= p.batch {
        return;
    }
    let t = time_index(b);
    if t >= p.seq {
        return;
    }
    let gx = (b * p.seq + t) * 4u * p.cell + j;
    let c1 = p.cell;
    let gates = recurrent + state_bias[j] + vec4(gates_x[gx], gates_x[gx + c1], gates_x[gx + 2u * c1], gates_x[gx + 3u * c1]);
    let input_gate = sigmoid(gates.x);
    let forget_gate = sigmoid(gates.y);
    let memory_init = safe_tanh(gates.z);
    let output_gate = sigmoid(gates.w);
    let s = b * p.cell + j;
    var c = input_gate * memory_init + forget_gate * c_state[s];
    if p.clip_cell != 0u {
        c = clamp(c, -p.cell_clip, p.cell_clip);
    }
    c_state[s] = c;
    m_out[s] = output_gate * safe_tanh(c);
}

fn h_at(b0: u32, u: u32, k: u32) -> f32 {
    return h_prev[tile_item(b0, u) * p.proj + k];
}

@compute @workgroup_size(64)
fn lstm_cell(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let j = wid.x * WG + lid.x;
    if j >= p.cell {
        return;
    }
    let b0 = wid.y * BATCH_TILE;
    // The four gate pre-activations of cell j for each item of the tile.
    var a0 = vec4(0.0); var a1 = vec4(0.0); var a2 = vec4(0.0); var a3 = vec4(0.0);
    var a4 = vec4(0.0); var a5 = vec4(0.0); var a6 = vec4(0.0); var a7 = vec4(0.0);
    let w_base = (j / BLOCK) * p.proj * BLOCK + j % BLOCK;
    for (var k = 0u; k < p.proj; k++) {
        let w = w_state[w_base + k * BLOCK];
        a0 += h_at(b0, 0u, k) * w;
        if BATCH_TILE >= 2u {
            a1 += h_at(b0, 1u, k) * w;
        }
        if BATCH_TILE >= 4u {
            a2 += h_at(b0, 2u, k) * w;
            a3 += h_at(b0, 3u, k) * w;
        }
        if BATCH_TILE >= 8u {
            a4 += h_at(b0, 4u, k) * w;
            a5 += h_at(b0, 5u, k) * w;
            a6 += h_at(b0, 6u, k) * w;
            a7 += h_at(b0, 7u, k) * w;
        }
    }
    finish_cell(b0, j, a0);
    if BATCH_TILE >= 2u {
        finish_cell(b0 + 1u, j, a1);
    }
    if BATCH_TILE >= 4u {
        finish_cell(b0 + 2u, j, a2);
        finish_cell(b0 + 3u, j, a3);
    }
    if BATCH_TILE >= 8u {
        finish_cell(b0 + 4u, j, a4);
        finish_cell(b0 + 5u, j, a5);
        finish_cell(b0 + 6u, j, a6);
        finish_cell(b0 + 7u, j, a7);
    }
}

// Clips and stores h of item b at projection element k.
fn finish_projection(b: u32, k: u32, sum: f32) {
    if b >= p.batch {
        return;
    }
    let t = time_index(b);
    if t >= p.seq {
        return;
    }
    var h = sum;
    if p.clip_proj != 0u {
        h = clamp(h, -p.proj_clip, p.proj_clip);
    }
    h_state[b * p.proj + k] = h;
    outputs[(b * p.seq + t) * p.proj + k] = h;
}

// m of tile item u at cells 4·q … 4·q + 3 (indices past the last cell repeat it; their
// weights are 0).
fn m_at(b0: u32, u: u32, q: u32) -> vec4<f32> {
    let row = tile_item(b0, u) * p.cell;
    let last = p.cell - 1u;
    let j = 4u * q;
    return vec4(m_in[row + j], m_in[row + min(j + 1u, last)], m_in[row + min(j + 2u, last)], m_in[row + min(j + 3u, last)]);
}

@compute @workgroup_size(64)
fn lstm_projection(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let k = wid.x * WG + lid.x;
    if k >= p.proj {
        return;
    }
    let b0 = wid.y * BATCH_TILE;
    if p.project == 0u {
        for (var u = 0u; u < BATCH_TILE; u++) {
            finish_projection(b0 + u, k, m_in[tile_item(b0, u) * p.cell + k]);
        }
        return;
    }
    var a0 = 0.0; var a1 = 0.0; var a2 = 0.0; var a3 = 0.0;
    var a4 = 0.0; var a5 = 0.0; var a6 = 0.0; var a7 = 0.0;
    let quads = (p.cell + 3u) / 4u;
    let w_base = (k / BLOCK) * quads * BLOCK + k % BLOCK;
    for (var q = 0u; q < quads; q++) {
        let w = w_proj[w_base + q * BLOCK];
        a0 += dot(m_at(b0, 0u, q), w);
        if BATCH_TILE >= 2u {
            a1 += dot(m_at(b0, 1u, q), w);
        }
        if BATCH_TILE >= 4u {
            a2 += dot(m_at(b0, 2u, q), w);
            a3 += dot(m_at(b0, 3u, q), w);
        }
        if BATCH_TILE >= 8u {
            a4 += dot(m_at(b0, 4u, q), w);
            a5 += dot(m_at(b0, 5u, q), w);
            a6 += dot(m_at(b0, 6u, q), w);
            a7 += dot(m_at(b0, 7u, q), w);
        }
    }
    finish_projection(b0, k, a0);
    if BATCH_TILE >= 2u {
        finish_projection(b0 + 1u, k, a1);
    }
    if BATCH_TILE >= 4u {
        finish_projection(b0 + 2u, k, a2);
        finish_projection(b0 + 3u, k, a3);
    }
    if BATCH_TILE >= 8u {
        finish_projection(b0 + 4u, k, a4);
        finish_projection(b0 + 5u, k, a5);
        finish_projection(b0 + 6u, k, a6);
        finish_projection(b0 + 7u, k, a7);
    }
}
