// Embedding lookup, one invocation per output element:
// out[t, c] = word[token[t], c] + position[pos[t], c] + segment[seg[t], c], with the position
// and segment terms optional. Ids are validated on the host before upload.
// A word table over the binding limit is bound in row chunks, one dispatch each: `word` then
// holds rows word_start..word_start + word_rows, and each dispatch writes only the tokens
// whose ids fall in it (so every output row is written exactly once).

struct Params {
    n: u32,     // elements of out: tokens × cols
    cols: u32,  // embedding width C
    has_position: u32,
    has_segment: u32,
    word_start: u32,
    word_rows: u32,
    _pad: vec2<u32>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> word: array<f32>;            // (word_rows, C)
@group(0) @binding(2) var<storage, read> position: array<f32>;        // (max_positions, C), if has_position
@group(0) @binding(3) var<storage, read> segment: array<f32>;         // (segments, C), if has_segment
@group(0) @binding(4) var<storage, read> token_ids: array<u32>;       // (tokens)
@group(0) @binding(5) var<storage, read> position_ids: array<u32>;    // (tokens), if has_position
@group(0) @binding(6) var<storage, read> segment_ids: array<u32>;     // (tokens), if has_segment
@group(0) @binding(7) var<storage, read_write> out: array<f32>;       // (tokens, C)

@compute @workgroup_size(256)
fn embedding(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = (wid.x + wid.y * nwg.x) * 256u + lid.x;
    if i >= p.n {
        return;
    }
    let t = i / p.cols;
    let c = i % p.cols;
    let id = token_ids[t];
    if id < p.word_start || id - p.word_start >= p.word_rows {
        return;
    }
    // Summed in the reference's order: (word + position) + segment.
    var v = word[(id - p.word_start) * p.cols + c];
    if p.has_position != 0u {
        v += position[position_ids[t] * p.cols + c];
    }
    if p.has_segment != 0u {
        v += segment[segment_ids[t] * p.cols + c];
    }
    out[i] = v;
}
