// The params shared by attention.wgsl and attention_backward.wgsl (prepended to both):
// lengths, head geometry, row strides and column offsets of q / k / v, masking, the score
// scale, and batch strides.
struct Params {
    tq: u32, tk: u32, heads: u32, head_dim: u32,
    q_stride: u32, kv_stride: u32, q_off: u32, k_off: u32,
    v_off: u32, causal: u32, query_offset: u32, has_mask: u32,
    scale: f32, write_probs: u32, mask_stride: u32, out_stride: u32,
    q_batch_stride: u32, kv_batch_stride: u32, _pad0: u32, _pad1: u32,
}

