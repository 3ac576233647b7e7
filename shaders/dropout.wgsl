// Inverted dropout, y = x · dropout_factor(i): also its own backward (dx = dy · the same
// factor), since the mask is regenerated from the key. dropout_factor comes from
// dropout_mask.wgsl, prepended to this file.

struct Params {
    n: u32,
    mask_threshold: u32,
    mask_scale: f32,
    mask_key0: u32,
    mask_key1: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(256)
fn dropout(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = (wid.x + wid.y * nwg.x) * 256u + lid.x;
    if i < p.n {
        y[i] = x[i] * dropout_factor(i, p.mask_threshold, p.mask_scale, p.mask_key0, p.mask_key1);
    }
}
