//! Training (native only): the loop every front end drives ([`trainer`], with the held-out
//! evaluation of [`evaluate`]); the parameters with their gradients and optimizer moments
//! ([`params`]), AdamW with warmup and decay schedules and clipping ([`optim`]), the batches a
//! run consumes ([`data`], BERT's masked pairs in [`masking`]) and the loss of each objective
//! ([`objective`]); the fine-tuning data of [`classification`], [`token_classification`],
//! [`multiple_choice`] and [`question_answering`] (answers scored per question as SQuAD scores them in
//! [`squad_evaluation`]); ELMo's biLM data and fresh models in [`elmo`]; fresh models in [`scratch`] and
//! fresh task heads on a checkpoint in [`task_heads`]. The models'
//! forward/backward pairs live beside their forward passes (`models::decoder::train` for GPT-2 and GPT,
//! `models::encoder::train` for BERT, `models::elmo::{train, classify}`, `nn`).

pub mod checkpoint;
pub mod classification;
pub mod cove;
pub mod cvt;
pub mod data;
pub mod distill;
pub mod electra;
pub mod elmo;
pub mod ernie2;
pub mod evaluate;
pub(crate) mod init;
pub mod masking;
pub mod multiple_choice;
pub mod multitask;
pub mod objective;
pub mod optim;
pub mod params;
pub mod question_answering;
pub mod scratch;
pub mod squad_evaluation;
pub mod stages;
pub mod task_heads;
pub mod token_classification;
pub mod tokenizer;
pub mod trainer;
pub mod ulmfit;
