//! Training (native only): the parameters with their gradients and optimizer moments
//! ([`params`]), AdamW with warmup and decay schedules and clipping ([`optim`]), and the
//! batches a run consumes ([`data`]). The models' forward/backward pairs live beside their
//! forward passes (`models::gpt2`, `models::bert`, `nn`); [`objective`] picks the loss; the loop that drives them is in the CLI.

pub mod data;
pub mod objective;
pub mod optim;
pub mod params;
