// Inverted dropout, y = x · dropout_factor(index(i)): also its own backward (dx = dy · the
// same factor), since the mask is regenerated from the key. Element i reads mask entry
// index(i) = (i / group)·stride + i % inner, so a mask can be shared: (1, 1, 1) is one entry
// per element; (C, 1, 1) one per row of C (fastai's embedding dropout, whole words); (T·C, C,
// C) one per (sequence, feature) of [B, T, C], shared over the T steps (locked dropout).
//   dropout             y = x · factor
//   dropout_accumulate  y += x · factor (a gradient through a dropped weight, added to the
//                       weight's)
// dropout_factor comes from dropout_mask.wgsl, prepended to this file.

struct Params {
    n: u32,
    mask_threshold: u32,
    mask_scale: f32,
    mask_key0: u32,
    mask_key1: u32,
    group: u32,
    stride: u32,
    inner: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

fn factor(i: u32) -> f32 {
    let index = (i / p.group) * p.stride + i % p.inner;
    return dropout_factor(index, p.mask_threshold, p.mask_scale, p.mask_key0, p.mask_key1);
}

@compute @workgroup_size(256)
fn dropout(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = (wid.x + wid.y * nwg.x) * 256u + lid.x;
    if i < p.n {
        y[i] = x[i] * factor(i);
    }
}

@compute @workgroup_size(256)
fn dropout_accumulate(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                      @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = (wid.x + wid.y * nwg.x) * 256u + lid.x;
    if i < p.n {
        y[i] += x[i] * factor(i);
    }
}
