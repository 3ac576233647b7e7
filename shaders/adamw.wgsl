// Adam's updates after clipping by the global gradient norm: AdamW with PyTorch's semantics
// (torch.optim.AdamW, foreach=False) and LAMB (You et al. 2019, Algorithm 2).
//   `clip_scale`: one invocation sums the per-parameter sums of squares (sum.wgsl's
//      sum_squares slots) into the global norm and writes [norm, scale] with
//      scale = min(1, max_norm / (norm + 1e-6)) (1 when max_norm ≤ 0: no clipping).
//   Both updates start per element from g = grad·scale and the moments
//      m = m + (1 − β1)(g − m);  v = β2·v + (1 − β2)·g²,  with bc1 = 1 − β1^t, bc2 = 1 − β2^t.
//   `adamw`: param ·= 1 − lr·wd;  param −= lr/bc1 · m / (√v / √bc2 + eps).
//   `lamb_update`: u = (m / bc1) / (√v / √bc2 + eps) + wd·param, written over grad (the
//      gradient is not needed after the update).
//   `lamb_apply`: with ‖param‖² and ‖u‖² in lamb_sums[slot], lamb_sums[slot + 1] (sum.wgsl's
//      sum_squares) and the layer adaptation on, ratio = ‖param‖ / ‖u‖ when both are
//      positive, else 1 (1 without the adaptation); param −= lr · ratio · u.

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
    slot: u32,          // lamb_apply: the parameter's first slot in lamb_sums
    adapt: u32,         // lamb_apply: 1 for the layer adaptation (trust ratio), 0 for ratio 1
    _pad0: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> param: array<f32>;  // (n)
@group(0) @binding(2) var<storage, read> grad: array<f32>;         // (n)
@group(0) @binding(3) var<storage, read_write> m: array<f32>;      // (n): first moment
@group(0) @binding(4) var<storage, read_write> v: array<f32>;      // (n): second moment
@group(0) @binding(5) var<storage, read> clip: array<f32>;         // (2): [norm, scale]

@group(0) @binding(1) var<storage, read> sums: array<f32>;         // clip_scale: (slots)
@group(0) @binding(2) var<storage, read_write> norm_scale: array<f32>;  // clip_scale: (2)

@group(0) @binding(2) var<storage, read_write> grad_update: array<f32>;  // lamb_update: (n), in g, out u
@group(0) @binding(2) var<storage, read> update: array<f32>;       // lamb_apply: (n), u
@group(0) @binding(3) var<storage, read> lamb_sums: array<f32>;    // lamb_apply: ‖param‖², ‖u‖² at slot, slot + 1

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

fn element(wid: vec3<u32>, nwg: vec3<u32>, lid: vec3<u32>) -> u32 {
    return (wid.x + wid.y * nwg.x) * 256u + lid.x;
}

// Updates m[i] and v[i] from the clipped gradient g; returns m / (√v / √bc2 + eps) (Adam's
// direction times bc1).
fn adam_direction(i: u32, g: f32) -> f32 {
    let m_new = m[i] + (1.0 - p.beta1) * (g - m[i]);
    let v_new = p.beta2 * v[i] + (1.0 - p.beta2) * g * g;
    m[i] = m_new;
    v[i] = v_new;
    return m_new / (sqrt(v_new) / p.bias_correction2_sqrt + p.eps);
}

@compute @workgroup_size(256)
fn adamw(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
         @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = element(wid, nwg, lid);
    if i >= p.n {
        return;
    }
    let direction = adam_direction(i, grad[i] * clip[1]);
    param[i] = param[i] * (1.0 - p.lr * p.weight_decay) - (p.lr / p.bias_correction1) * direction;
}

@compute @workgroup_size(256)
fn lamb_update(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = element(wid, nwg, lid);
    if i >= p.n {
        return;
    }
    grad_update[i] = adam_direction(i, grad_update[i] * clip[1]) / p.bias_correction1 + p.weight_decay * param[i];
}

@compute @workgroup_size(256)
fn lamb_apply(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = element(wid, nwg, lid);
    if i >= p.n {
        return;
    }
    let w2 = lamb_sums[p.slot];
    let u2 = lamb_sums[p.slot + 1u];
    var ratio = 1.0;
    if p.adapt == 1u && w2 > 0.0 && u2 > 0.0 {
        ratio = sqrt(w2) / sqrt(u2);
    }
    param[i] = param[i] - p.lr * ratio * update[i];
}
