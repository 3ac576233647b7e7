// The params shared by attention.wgsl and attention_backward.wgsl (prepended to both):
// lengths, head geometry, row strides and column offsets of q / k / v, masking, the score
// scale, batch strides, and dropout on the probabilities (dropout_factor comes from
// dropout_mask.wgsl, prepended before this file).
struct Params {
    tq: u32, tk: u32, heads: u32, head_dim: u32,
    q_stride: u32, kv_stride: u32, q_off: u32, k_off: u32,
    v_off: u32, causal: u32, query_offset: u32, has_mask: u32,
    scale: f32, write_probs: u32, mask_stride: u32, out_stride: u32,
    q_batch_stride: u32, kv_batch_stride: u32, has_dropout: u32, _pad0: u32,
    drop_threshold: u32, drop_scale: f32, drop_key0: u32, drop_key1: u32,
}

// The dropout factor of probability `index` of the (B, H, Tq, Tk) probabilities: 0 or
// 1/(1 − p), or 1 without dropout. The saved probabilities are the undropped ones; the
// backward regenerates the mask.
fn prob_dropout(index: u32) -> f32 {
    if p.has_dropout == 0u {
        return 1.0;
    }
    return dropout_factor(index, p.drop_threshold, p.drop_scale, p.drop_key0, p.drop_key1);
}

