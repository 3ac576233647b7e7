// Reductions that gradients need. `column_sums`: out[c] += Σ_r x[r, c], one invocation per
// column walking the rows (a bias's gradient: owner-computes, no atomics). `sum_squares`: one
// workgroup writes Σ x² of a whole tensor into out[slot] (one slot per parameter; the global
// gradient norm is the root of the slots' sum).

// workgroup_sum comes from reduce.wgsl, prepended to this file.

struct Params {
    rows: u32,
    cols: u32,   // column_sums: columns; sum_squares: elements
    slot: u32,   // sum_squares: where the sum goes
    _pad: u32,
}

const WG: u32 = 256u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;          // (rows, cols) | (cols)
@group(0) @binding(2) var<storage, read_write> out: array<f32>;  // (cols) | (≥ slot + 1)

@compute @workgroup_size(256)
fn column_sums(@builtin(global_invocation_id) gid: vec3<u32>) {
    let c = gid.x;
    if c >= p.cols {
        return;
    }
    var s = 0.0;
    for (var r = 0u; r < p.rows; r++) {
        s += x[r * p.cols + c];
    }
    out[c] += s;
}

@compute @workgroup_size(256)
fn sum_squares(@builtin(local_invocation_id) lid: vec3<u32>) {
    let t = lid.x;
    var s = 0.0;
    for (var i = t; i < p.cols; i += WG) {
        s += x[i] * x[i];
    }
    let total = workgroup_sum(t, s);
    if t == 0u {
        out[p.slot] = total;
    }
}
