// What lstm.wgsl (inference) and lstm_train.wgsl (training) share, prepended to both: the
// params, the lengths, which time index an item works on at a step, and the activations.
// Item b is active at steps s < lengths[b], at time t = s (forward) or lengths[b] − 1 − s
// (reverse: each sequence starts from its own last token). `project` is 0 for an LSTM without
// a projection (PyTorch's nn.LSTM, AWD-LSTM, CoVe): there h = m and proj = cell.

struct Params {
    batch: u32, seq: u32, cell: u32, proj: u32,
    step: u32, reverse: u32, clip_cell: u32, clip_proj: u32,
    cell_clip: f32, proj_clip: f32, project: u32, _pad0: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> lengths: array<u32>;          // (B)

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
