// Row copies between tensors of different layouts: for each pair i, p.width floats of row
// map[2i] of src, from column p.src_offset, go to row map[2i + 1] of dst, from column
// p.col_offset. Concatenates along the last dimension (and splits: a block of columns out),
// drops positions (ELMo's sentence boundaries) and lays rows out in a larger tensor, in one
// dispatch. One invocation per copied element.

struct Params {
    pairs: u32,       // number of (src row, dst row) pairs
    width: u32,       // floats copied per row
    dst_stride: u32,  // floats per destination row
    col_offset: u32,  // first destination column written
    src_stride: u32,  // floats per source row
    src_offset: u32,  // first source column read
}

const WG: u32 = 256u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> map: array<u32>;        // (pairs, 2): src row, dst row
@group(0) @binding(2) var<storage, read> src: array<f32>;        // (rows, src_stride)
@group(0) @binding(3) var<storage, read_write> dst: array<f32>;  // (rows', dst_stride)

@compute @workgroup_size(256)
fn copy_rows(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = (wid.x + wid.y * nwg.x) * WG + lid.x;
    if i >= p.pairs * p.width {
        return;
    }
    let pair = i / p.width;
    let col = i % p.width;
    dst[map[2u * pair + 1u] * p.dst_stride + p.col_offset + col] = src[map[2u * pair] * p.src_stride + p.src_offset + col];
}
