//! The registry of kernel twins: which Rust function computes each WGSL entry point on the
//! host device. A kernel missing here is refused on the host with an error naming it: those
//! that only training uses (backward passes, dropout, the optimizer and its sums).

mod activations;
mod attention;
mod char_cnn;
mod cross_entropy;
mod elementwise;
mod embedding;
mod highway;
mod lanes;
mod layer_norm;
mod lstm;
mod matmul;
mod rows;
mod scalar_mix;
mod softmax;
mod topk;

use super::HostCall;
use crate::error::Result;

pub(crate) type Twin = fn(&mut HostCall<'_>) -> Result<()>;

/// The twin of entry point `entry` of `shaders/<shader>.wgsl`.
pub(crate) fn twin(shader: &str, entry: &str) -> Option<Twin> {
    let twin: Twin = match (shader, entry) {
        ("matmul_tiled", "matmul_tiled") => matmul::matmul,
        ("attention", "attention" | "attention_rows") => attention::attention,
        ("scalar_mix", "mix") => scalar_mix::mix,
        ("lstm", "lstm_cell") => lstm::lstm_cell,
        ("lstm", "lstm_projection") => lstm::lstm_projection,
        ("char_cnn", "im2col") => char_cnn::im2col,
        ("char_cnn", "max_pool") => char_cnn::max_pool,
        ("highway", "highway") => highway::highway,
        ("layer_norm", "layer_norm") => layer_norm::layer_norm,
        ("embedding", "embedding") => embedding::embedding,
        ("elementwise", "unary") => elementwise::unary,
        ("elementwise", "binary") => elementwise::binary,
        ("softmax", "softmax") => softmax::softmax,
        ("rows", "copy_rows") => rows::copy_rows,
        ("topk", "topk") => topk::topk,
        ("cross_entropy", "rows") => cross_entropy::rows,
        ("cross_entropy", "mean") => cross_entropy::mean,
        _ => return None,
    };
    Some(twin)
}
