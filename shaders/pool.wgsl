// ULMFiT's concat pooling (Howard & Ruder 2018, §3.3) of x (B, T, C) over each sequence's
// window of positions [start_b, end_b) (windows: (B, 2) u32, start < end ≤ T):
//   concat_pool          (one invocation per (b, c)): out[b] = [x[b, end−1], max_t x[b, t],
//                        mean_t x[b, t]] (B, 3C); argmax[b, c] = the first t of the max.
//   concat_pool_backward (one invocation per element of d_x): d_x[b, t, c] = d_last at
//                        t = end − 1, + d_max at t = argmax, + d_mean / (end − start) inside the
//                        window; 0 elsewhere (every element written: no atomics).

struct Params {
    batch: u32,
    seq: u32,
    width: u32,
    _pad: u32,
}

const WG: u32 = 256u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> windows: array<u32>;          // (B, 2): start, end
// concat_pool
@group(0) @binding(2) var<storage, read> x: array<f32>;                // (B, T, C)
@group(0) @binding(3) var<storage, read_write> pooled: array<f32>;     // (B, 3C)
@group(0) @binding(4) var<storage, read_write> argmax_out: array<u32>; // (B, C)
// concat_pool_backward
@group(0) @binding(2) var<storage, read> d_pooled: array<f32>;         // (B, 3C)
@group(0) @binding(3) var<storage, read> argmax_in: array<u32>;        // (B, C)
@group(0) @binding(4) var<storage, read_write> d_x: array<f32>;        // (B, T, C)

fn flat_index(wid: vec3<u32>, nwg: vec3<u32>, lid: vec3<u32>) -> u32 {
    return (wid.x + wid.y * nwg.x) * WG + lid.x;
}

@compute @workgroup_size(256)
fn concat_pool(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = flat_index(wid, nwg, lid);
    if i >= p.batch * p.width {
        return;
    }
    let b = i / p.width;
    let c = i % p.width;
    let start = windows[2u * b];
    let end = windows[2u * b + 1u];
    let row = b * p.seq;
    var top = x[(row + start) * p.width + c];
    var at = start;
    var total = 0.0;
    for (var t = start; t < end; t++) {
        let v = x[(row + t) * p.width + c];
        if v > top {
            top = v;
            at = t;
        }
        total += v;
    }
    let out = b * 3u * p.width + c;
    pooled[out] = x[(row + end - 1u) * p.width + c];
    pooled[out + p.width] = top;
    pooled[out + 2u * p.width] = total / f32(end - start);
    argmax_out[i] = at;
}

@compute @workgroup_size(256)
fn concat_pool_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                        @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = flat_index(wid, nwg, lid);
    if i >= p.batch * p.seq * p.width {
        return;
    }
    let c = i % p.width;
    let t = (i / p.width) % p.seq;
    let b = i / (p.width * p.seq);
    let start = windows[2u * b];
    let end = windows[2u * b + 1u];
    let d = b * 3u * p.width + c;
    var g = 0.0;
    if t == end - 1u {
        g += d_pooled[d];
    }
    if t == argmax_in[b * p.width + c] {
        g += d_pooled[d + p.width];
    }
    if t >= start && t < end {
        g += d_pooled[d + 2u * p.width] / f32(end - start);
    }
    d_x[i] = g;
}
