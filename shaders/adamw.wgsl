// One AdamW step with PyTorch's semantics (torch.optim.AdamW, foreach=False), after clipping
// by the global gradient norm:
//   `clip_scale`: one invocation sums the per-parameter sums of squares (sum.wgsl's
//      sum_squares slots) into the global norm and writes [norm, scale] with
//      scale = min(1, max_norm / (norm + 1e-6)) (1 when max_norm ≤ 0: no clipping).
//   `adamw`: per element, g = grad·scale, then
//      param ·= 1 − lr·wd;  m = m + (1 − β1)(g − m);  v = β2·v + (1 − β2)·g²
//      param −= lr/bc1 · m / (√v / √bc2 + eps)   with bc1 = 1 − β1^t, bc2 = 1 − β2^t.

struct Params {
    n: u32,             // adamw: elements; clip_scale: slots
    lr: f32,
    beta1: f32,
    beta2: f32,
    eps: f32,
    weight_decay: f32,
    bias_correction1: f32,
    bias_correction2_sqrt: f32,
    max_norm: f32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> param: array<f32>;  // (n)
@group(0) @binding(2) var<storage, read> grad: array<f32>;         // (n)
@group(0) @binding(3) var<storage, read_write> m: array<f32>;      // (n): first moment
@group(0) @binding(4) var<storage, read_write> v: array<f32>;      // (n): second moment
@group(0) @binding(5) var<storage, read> clip: array<f32>;         // (2): [norm, scale]

@group(0) @binding(1) var<storage, read> sums: array<f32>;         // clip_scale: (slots)
@group(0) @binding(2) var<storage, read_write> norm_scale: array<f32>;  // clip_scale: (2)

@compute @workgroup_size(1)
fn clip_scale() {
    var total = 0.0;
    for (var i = 0u; i < p.n; i++) {
        total += sums[i];
    }
    let norm = sqrt(total);
    norm_scale[0] = norm;
    norm_scale[1] = select(1.0, min(1.0, p.max_norm / (norm + 1e-6)), p.max_norm > 0.0);
}

@compute @workgroup_size(256)
fn adamw(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
         @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = (wid.x + wid.y * nwg.x) * 256u + lid.x;
    if i >= p.n {
        return;
    }
    let g = grad[i] * clip[1];
    let m_new = m[i] + (1.0 - p.beta1) * (g - m[i]);
    let v_new = p.beta2 * v[i] + (1.0 - p.beta2) * g * g;
    m[i] = m_new;
    v[i] = v_new;
    let decayed = param[i] * (1.0 - p.lr * p.weight_decay);
    let denom = sqrt(v_new) / p.bias_correction2_sqrt + p.eps;
    param[i] = decayed - (p.lr / p.bias_correction1) * (m_new / denom);
}
