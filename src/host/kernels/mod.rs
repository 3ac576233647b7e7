//! The registry of kernel twins: which Rust function computes each WGSL entry point on the
//! host device. A kernel missing here would be refused on the host with an error naming it;
//! every kernel of the library has one.

mod activations;
mod attention;
mod attention_backward;
mod char_cnn;
mod cross_entropy;
mod distillation;
mod dropout;
mod elementwise;
mod embedding;
mod highway;
mod lanes;
mod layer_norm;
mod lstm;
mod lstm_train;
mod matmul;
mod optimizer;
mod rows;
mod scalar_mix;
mod softmax;
mod sum;
mod topk;

use super::HostCall;
use crate::error::Result;

pub(crate) type Twin = fn(&mut HostCall<'_>) -> Result<()>;

/// The twin of entry point `entry` of `shaders/<shader>.wgsl`.
pub(crate) fn twin(shader: &str, entry: &str) -> Option<Twin> {
    let twin: Twin = match (shader, entry) {
        ("matmul_tiled", "matmul_tiled") => matmul::matmul,
        ("attention", "attention" | "attention_rows") => attention::attention,
        ("attention_backward", "attention_backward_query") => attention_backward::query,
        ("attention_backward", "attention_backward_key") => attention_backward::key,
        ("attention_backward", "attention_backward_value") => attention_backward::value,
        ("scalar_mix", "mix") => scalar_mix::mix,
        ("scalar_mix", "mix_backward") => scalar_mix::mix_backward,
        ("lstm", "lstm_cell") => lstm::lstm_cell,
        ("lstm", "lstm_projection") => lstm::lstm_projection,
        ("lstm_train", "trace_cell") => lstm_train::trace_cell,
        ("lstm_train", "trace_projection") => lstm_train::trace_projection,
        ("lstm_train", "backward_h") => lstm_train::backward_h,
        ("lstm_train", "backward_cell") => lstm_train::backward_cell,
        ("lstm_train", "backward_state") => lstm_train::backward_state,
        ("char_cnn", "im2col") => char_cnn::im2col,
        ("char_cnn", "max_pool") => char_cnn::max_pool,
        ("char_cnn", "pool_backward") => char_cnn::pool_backward,
        ("char_cnn", "route_max") => char_cnn::route_max,
        ("char_cnn", "col2im") => char_cnn::col2im,
        ("highway", "highway") => highway::highway,
        ("highway", "highway_backward") => highway::highway_backward,
        ("layer_norm", "layer_norm") => layer_norm::layer_norm,
        ("layer_norm_backward", "layer_norm_backward") => layer_norm::layer_norm_backward,
        ("layer_norm_backward", "layer_norm_param_grads") => layer_norm::layer_norm_param_grads,
        ("embedding", "embedding") => embedding::embedding,
        ("embedding_backward", "embedding_backward") => embedding::embedding_backward,
        ("dropout", "dropout") => dropout::dropout,
        ("elementwise", "unary") => elementwise::unary,
        ("elementwise", "unary_backward") => elementwise::unary_backward,
        ("elementwise", "binary") => elementwise::binary,
        ("softmax", "softmax") => softmax::softmax,
        ("rows", "copy_rows") => rows::copy_rows,
        ("topk", "topk") => topk::topk,
        ("cross_entropy", "rows") => cross_entropy::rows,
        ("cross_entropy", "mean") => cross_entropy::mean,
        ("cross_entropy", "backward") => cross_entropy::backward,
        ("distillation", "soft_rows") => distillation::soft_rows,
        ("distillation", "soft_backward") => distillation::soft_backward,
        ("distillation", "cosine") => distillation::cosine,
        ("distillation", "mean") => distillation::mean,
        ("adamw", "clip_scale") => optimizer::clip_scale,
        ("adamw", "adamw") => optimizer::adamw,
        ("adamw", "lamb_update") => optimizer::lamb_update,
        ("adamw", "lamb_apply") => optimizer::lamb_apply,
        ("sum", "column_sums") => sum::column_sums,
        ("sum", "sum_squares") => sum::sum_squares,
        _ => return None,
    };
    Some(twin)
}
