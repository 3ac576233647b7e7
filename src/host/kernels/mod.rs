//! The registry of kernel twins: which Rust function computes each WGSL entry point on the
//! host device. A kernel missing here would be refused on the host with an error naming it;
//! every kernel of the library has one natively, and the browser build has those of inference.

mod activations;
mod attention;
#[cfg(not(target_arch = "wasm32"))]
mod attention_backward;
mod char_cnn;
mod cross_entropy;
#[cfg(not(target_arch = "wasm32"))]
mod distillation;
#[cfg(not(target_arch = "wasm32"))]
mod dropout;
mod elementwise;
mod embedding;
mod highway;
mod lanes;
mod layer_norm;
mod lstm;
#[cfg(not(target_arch = "wasm32"))]
mod lstm_train;
mod matmul;
#[cfg(not(target_arch = "wasm32"))]
mod optimizer;
mod rows;
mod scalar_mix;
mod softmax;
#[cfg(not(target_arch = "wasm32"))]
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
        _ => return training_twin(shader, entry),
    };
    Some(twin)
}

/// The twins only training uses (backward passes, dropout, the optimizers and their sums,
/// distillation): native only, as training is (the browser build would carry them unused).
#[cfg(not(target_arch = "wasm32"))]
fn training_twin(shader: &str, entry: &str) -> Option<Twin> {
    let twin: Twin = match (shader, entry) {
        ("attention_backward", "attention_backward_query") => attention_backward::query,
        ("attention_backward", "attention_backward_key") => attention_backward::key,
        ("attention_backward", "attention_backward_value") => attention_backward::value,
        ("scalar_mix", "mix_backward") => scalar_mix::mix_backward,
        ("lstm_train", "trace_cell") => lstm_train::trace_cell,
        ("lstm_train", "trace_projection") => lstm_train::trace_projection,
        ("lstm_train", "backward_h") => lstm_train::backward_h,
        ("lstm_train", "backward_cell") => lstm_train::backward_cell,
        ("lstm_train", "backward_state") => lstm_train::backward_state,
        ("char_cnn", "pool_backward") => char_cnn::pool_backward,
        ("char_cnn", "route_max") => char_cnn::route_max,
        ("char_cnn", "col2im") => char_cnn::col2im,
        ("highway", "highway_backward") => highway::highway_backward,
        ("layer_norm_backward", "layer_norm_backward") => layer_norm::layer_norm_backward,
        ("layer_norm_backward", "layer_norm_param_grads") => layer_norm::layer_norm_param_grads,
        ("embedding_backward", "embedding_backward") => embedding::embedding_backward,
        ("dropout", "dropout") => dropout::dropout,
        ("elementwise", "unary_backward") => elementwise::unary_backward,
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

#[cfg(target_arch = "wasm32")]
fn training_twin(_shader: &str, _entry: &str) -> Option<Twin> {
    None
}
